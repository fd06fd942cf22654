"""BM25 over the bundled Search-R1 corpus, and Tavily's API against a loopback server."""

import asyncio
import json
import shutil

import pytest

from tests.tools.loopback import serve
from toolorch_jax.config import ConfigError
from toolorch_jax.datadir import data_path
from toolorch_jax.tools import Price
from toolorch_jax.tools import search
from toolorch_jax.tools.http_retry import RetryPolicy
from toolorch_jax.tools.search import BM25Search, BM25Settings, TavilySearch, TavilySettings


@pytest.fixture
def fresh_indexes(monkeypatch):
  """No index kept in memory from another test: each test sees what is on disk."""
  monkeypatch.setattr(search, "_INDEXES", {})


def bm25(tmp_path, **settings):
  settings = BM25Settings(index_dir=str(tmp_path / "index"), **settings)
  return BM25Search("search", settings, price=Price(per_call=0.001))


def call(tool, arguments):
  return asyncio.run(tool.call(arguments))


@pytest.mark.parametrize("query, expected", [
    ("Pavia Cathedral dome architect", {"4", "5"}),  # the two Pavia Cathedral passages
    ("Ao Oni film Takeshi", {"3", "8"}),             # the two Ao Oni passages
    ("Soviet airborne corps Red Army", {"9"}),
    ("Evan Morris lobbyist Genentech", {"0"}),
])
def test_bm25_ranks_the_relevant_passages_first(tmp_path, fresh_indexes, query, expected):
  result = call(bm25(tmp_path), {"query": query, "top_k": 5})
  assert result.ok and result.cost_usd == 0.001
  passages = result.metadata["passages"]
  assert {p["id"] for p in passages[:len(expected)]} == expected
  scores = [p["score"] for p in passages]
  assert scores == sorted(scores, reverse=True) and scores[0] > 0
  assert result.text.startswith(f"[1] id={passages[0]['id']} score=")


def test_bm25_top_k_and_no_match(tmp_path, fresh_indexes):
  tool = bm25(tmp_path, top_k=2)
  assert len(call(tool, {"query": "cathedral"}).metadata["passages"]) <= 2
  assert len(call(tool, {"query": "Pavia cathedral dome", "top_k": 1}).metadata["passages"]) == 1
  nothing = call(tool, {"query": "zzyzx qwxq"})
  assert nothing.ok and nothing.text == "no passage matches the query"
  assert nothing.metadata["passages"] == []


def test_bm25_index_is_built_once_then_loaded_from_disk(tmp_path, monkeypatch):
  monkeypatch.setattr(search, "_INDEXES", {})
  first = call(bm25(tmp_path), {"query": "Pavia"})
  again = call(bm25(tmp_path), {"query": "Pavia"})
  monkeypatch.setattr(search, "_INDEXES", {})  # a new process: nothing in memory
  reloaded = call(bm25(tmp_path), {"query": "Pavia"})
  assert [r.metadata["index"] for r in (first, again, reloaded)] == ["built", "memory", "disk"]
  assert first.metadata["passages"] == reloaded.metadata["passages"]
  assert len(list((tmp_path / "index").iterdir())) == 1


def test_bm25_changed_corpus_is_reindexed(tmp_path, fresh_indexes):
  corpus = tmp_path / "corpus.jsonl"
  shutil.copy(data_path("corpus/corpus.jsonl"), corpus)
  assert call(bm25(tmp_path, corpus=str(corpus)), {"query": "Pavia"}).metadata["index"] == "built"
  with corpus.open("a") as f:
    f.write(json.dumps({"id": "new", "contents": "\"Quokka\"\nThe quokka lives on Rottnest."}) + "\n")
  search._INDEXES.clear()
  result = call(bm25(tmp_path, corpus=str(corpus)), {"query": "quokka Rottnest"})
  assert result.metadata["index"] == "built"
  assert result.metadata["passages"][0]["id"] == "new"


def test_bm25_bad_corpus(tmp_path, fresh_indexes):
  with pytest.raises(ConfigError, match="settings.corpus: file not found: /nonexistent.jsonl"):
    bm25(tmp_path, corpus="/nonexistent.jsonl")
  corpus = tmp_path / "bad.jsonl"
  corpus.write_text('{"id": "1", "contents": "fine"}\n{"id": "2", "text": "wrong field"}\n')
  result = call(bm25(tmp_path, corpus=str(corpus)), {"query": "fine"})
  assert result.error.startswith(f"{corpus}:2: not a passage with 'id' and 'contents'")


TAVILY_KEY = "tvly-test-0123456789"


def tavily_reply(seen):
  """Tavily's /search response shape."""
  query = seen.body["query"]
  results = [{"title": f"Result {i} for {query}", "url": f"https://example.org/{i}",
              "content": f"Passage {i} about {query}.", "score": 0.9 - i / 10, "raw_content": None}
             for i in range(seen.body["max_results"])]
  return ("json", 200, {"query": query, "follow_up_questions": None, "answer": None,
                        "images": [], "results": results, "response_time": 0.42})


def tavily(url, **settings):
  settings = TavilySettings(base_url=url, api_key_env="TOOLORCH_TEST_TAVILY_KEY",
                            retry=RetryPolicy(max_attempts=3, backoff_s=0.01, timeout_s=2), **settings)
  return TavilySearch("web_search", settings, price=Price(per_call=0.008))


def test_tavily_search_over_http(monkeypatch):
  monkeypatch.setenv("TOOLORCH_TEST_TAVILY_KEY", TAVILY_KEY)
  with serve([("json", 500, {"detail": "busy"}), tavily_reply]) as server:
    result = call(tavily(server.url, max_results=3), {"query": "Pavia Cathedral"})
  assert result.ok, result.error
  assert result.cost_usd == 0.008 and result.metadata["attempts"] == 2
  urls = [r["url"] for r in result.metadata["results"]]
  assert urls == [f"https://example.org/{i}" for i in range(3)]
  assert result.text.startswith("[1] Result 0 for Pavia Cathedral (https://example.org/0)\n"
                                "Passage 0 about Pavia Cathedral.")
  request = server.requests[-1]
  assert request.path == "/search"
  assert request.headers["Authorization"] == f"Bearer {TAVILY_KEY}"
  assert request.body == {"query": "Pavia Cathedral", "search_depth": "basic", "max_results": 3}


def test_tavily_without_key_or_with_a_bad_body(monkeypatch):
  monkeypatch.delenv("TOOLORCH_TEST_TAVILY_KEY", raising=False)
  with serve([tavily_reply]) as server:
    no_key = call(tavily(server.url), {"query": "x"})
  assert no_key.error == ("web search needs a Tavily API key: set the environment variable"
                          " TOOLORCH_TEST_TAVILY_KEY")
  assert server.requests == [] and no_key.cost_usd == 0
  monkeypatch.setenv("TOOLORCH_TEST_TAVILY_KEY", TAVILY_KEY)
  with serve([("json", 200, {"results": "not a list"})]) as server:
    bad = call(tavily(server.url), {"query": "x"})
  assert "after 3 attempts" in bad.error and "'results' is not a list" in bad.error
  assert bad.cost_usd == 0
