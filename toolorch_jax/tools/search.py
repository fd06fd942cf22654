"""Search tools: `bm25_search` over a local passage corpus, `tavily_search` over the web.

The local corpus is Search-R1's format (jsonl with `id` and `contents`: a quoted title, a newline,
the passage), the one ToolOrchestra's retriever serves. Its BM25 index (bm25s) is built once per
corpus content and kept on disk, keyed by the corpus's sha256, so a changed corpus is re-indexed.
"""

from __future__ import annotations

import asyncio
import dataclasses
import hashlib
import os
import shutil
import tempfile
import threading
from pathlib import Path
from typing import Any

import bm25s

from toolorch_jax.config import ConfigError
from toolorch_jax.data.jsonl import read_jsonl
from toolorch_jax.datadir import data_file
from toolorch_jax.tools.base import Tool, ToolContext, ToolError, ToolResult
from toolorch_jax.tools.http_retry import RetryPolicy, post_json


def _cache_root() -> Path:
  base = os.environ.get("XDG_CACHE_HOME") or os.path.join(os.path.expanduser("~"), ".cache")
  return Path(base) / "toolorch_jax" / "bm25"


@dataclasses.dataclass
class BM25Settings:
  """The corpus, its fields, and where its index is kept."""

  corpus: str = "corpus/corpus.jsonl"  # jsonl in the data directory, or an absolute path
  id_field: str = "id"
  text_field: str = "contents"
  top_k: int = 3
  stopwords: str = "en"
  index_dir: str = ""  # where built indexes are kept; "" = $XDG_CACHE_HOME/toolorch_jax/bm25

  def __post_init__(self):
    if self.top_k < 1:
      raise ConfigError(f"top_k must be >= 1, got {self.top_k}")


@dataclasses.dataclass
class _Index:
  ids: list[str]
  texts: list[str]
  retriever: bm25s.BM25


_INDEXES: dict[tuple, _Index] = {}
_INDEX_LOCK = threading.Lock()


def _read_corpus(path: Path, id_field: str, text_field: str) -> tuple[list[str], list[str], str]:
  """(ids, texts, sha256 of the file); ToolError naming the line that is not a passage."""
  ids, texts = [], []
  try:
    for where, record in read_jsonl(path, "settings.corpus"):
      if id_field not in record or text_field not in record:
        raise ToolError(f"{where}: not a passage with '{id_field}' and '{text_field}'")
      ids.append(str(record[id_field]))
      texts.append(str(record[text_field]))
  except ConfigError as err:
    raise ToolError(f"{err} (expected a passage with '{id_field}' and '{text_field}')") from None
  if not ids:
    raise ToolError(f"{path}: the corpus has no passages")
  return ids, texts, hashlib.sha256(path.read_bytes()).hexdigest()


def load_index(path: Path, settings: BM25Settings) -> tuple[_Index, str]:
  """The corpus's index and where it came from: 'memory', 'disk' or 'built' (and saved)."""
  cache = Path(settings.index_dir) if settings.index_dir else _cache_root()
  key = (str(path), settings.id_field, settings.text_field, settings.stopwords, str(cache))
  with _INDEX_LOCK:
    if key in _INDEXES:
      return _INDEXES[key], "memory"
    ids, texts, digest = _read_corpus(path, settings.id_field, settings.text_field)
    recipe = f"{digest}:{settings.text_field}:{settings.stopwords}:bm25s-{bm25s.__version__}"
    directory = cache / hashlib.sha256(recipe.encode()).hexdigest()[:32]
    if (directory / "params.index.json").is_file():
      retriever, origin = bm25s.BM25.load(str(directory)), "disk"
    else:
      retriever, origin = bm25s.BM25(), "built"
      retriever.index(bm25s.tokenize(texts, stopwords=settings.stopwords, show_progress=False),
                      show_progress=False)
      cache.mkdir(parents=True, exist_ok=True)
      staging = tempfile.mkdtemp(dir=cache, prefix=".building-")
      retriever.save(staging)
      try:
        os.rename(staging, directory)  # atomic: another process never sees half an index
      except OSError:  # it built the same index first
        shutil.rmtree(staging, ignore_errors=True)
    _INDEXES[key] = _Index(ids, texts, retriever)
    return _INDEXES[key], origin


class BM25Search(Tool):
  """Ranks the passages of a local corpus against a query with BM25."""

  Settings = BM25Settings
  description = "Search a local collection of Wikipedia passages; returns the best matches."
  parameters = {"type": "object", "properties": {
      "query": {"type": "string", "minLength": 1, "description": "keywords to search for"},
      "top_k": {"type": "integer", "minimum": 1, "maximum": 50,
                "description": "how many passages to return"}},
      "required": ["query"], "additionalProperties": False}

  def __init__(self, name: str, settings: BM25Settings | None = None, **kwargs):
    super().__init__(name, settings, **kwargs)
    self.corpus = data_file(self.settings.corpus, "settings.corpus")

  def search(self, query: str, top_k: int) -> tuple[list[dict[str, Any]], str]:
    """(passages with a positive score, best first; where the index came from)."""
    index, origin = load_index(self.corpus, self.settings)
    tokens = bm25s.tokenize([query], stopwords=self.settings.stopwords, return_ids=False,
                            show_progress=False)
    docs, scores = index.retriever.retrieve(tokens, k=min(top_k, len(index.ids)),
                                            show_progress=False)
    return [{"id": index.ids[d], "score": round(float(s), 4), "text": index.texts[d]}
            for d, s in zip(docs[0], scores[0]) if s > 0], origin

  async def run(self, arguments: dict[str, Any], context: ToolContext) -> ToolResult:
    passages, origin = await asyncio.to_thread(
        self.search, arguments["query"], arguments.get("top_k", self.settings.top_k))
    text = "\n\n".join(f"[{i}] id={p['id']} score={p['score']:.3f}\n{p['text']}"
                       for i, p in enumerate(passages, 1)) or "no passage matches the query"
    return ToolResult(text=text, cost_usd=self.price.cost(),
                      metadata={"passages": passages, "index": origin})


@dataclasses.dataclass
class TavilySettings:
  """Where Tavily is, which variable holds its key, and how to search."""

  api_key_env: str = "TAVILY_API_KEY"
  base_url: str = "https://api.tavily.com"
  max_results: int = 5
  search_depth: str = "basic"  # basic: 1 credit a call, advanced: 2; set the price to match
  retry: RetryPolicy = dataclasses.field(default_factory=lambda: RetryPolicy(timeout_s=30.0))


def _tavily_results(body: Any) -> list[dict[str, Any]]:
  results = body["results"]
  if not isinstance(results, list):
    raise TypeError("'results' is not a list")
  return [{"title": r.get("title", ""), "url": r["url"], "content": r.get("content", ""),
           "score": r.get("score")} for r in results]


class TavilySearch(Tool):
  """Web search through Tavily's HTTP API."""

  Settings = TavilySettings
  description = "Search the web; returns titles, addresses and extracts of the best pages."
  parameters = {"type": "object", "properties": {
      "query": {"type": "string", "minLength": 1, "description": "what to search for"},
      "max_results": {"type": "integer", "minimum": 1, "maximum": 20}},
      "required": ["query"], "additionalProperties": False}

  async def run(self, arguments: dict[str, Any], context: ToolContext) -> ToolResult:
    s = self.settings
    key = os.environ.get(s.api_key_env)
    if not key:
      raise ToolError("web search needs a Tavily API key: set the environment variable"
                      f" {s.api_key_env}")
    payload = {"query": arguments["query"], "search_depth": s.search_depth,
               "max_results": arguments.get("max_results", s.max_results)}
    reply = await post_json(f"{s.base_url.rstrip('/')}/search", payload,
                            headers={"Authorization": f"Bearer {key}"}, policy=s.retry,
                            parse=_tavily_results)
    text = "\n\n".join(f"[{i}] {r['title']} ({r['url']})\n{r['content']}"
                       for i, r in enumerate(reply.value, 1)) or "no results"
    return ToolResult(text=text, cost_usd=self.price.cost(),
                      metadata={"results": reply.value, "attempts": reply.attempts,
                                "failures": reply.failures})
