"""The one place that imports JetStream 0.2.2 and makes it fit for this project.

JetStream is archived upstream at 0.2.2, and as published it: imports seqio (and so TensorFlow)
for a tokenizer we never use; calls `jax.tree_map`, which current JAX removed; sets the root logger
to DEBUG with a stdout handler at import; SIGKILLs the whole process when any driver thread raises;
binds its gRPC server to all interfaces; drops the stop token and has no log-probs in its results.
This module changes exactly those behaviours and nothing else imports `jetstream` directly:

- a stand-in `seqio.vocabularies` module (only its class names are referenced at import);
- `orchestrator.delete_pytree` rewritten with `jax.tree.map`;
- the root logger's level and handlers restored after import;
- `orchestrator.JetThread` replaced by a thread that logs the failure, records it on the module
  (`thread_failures`) and lets the process live; the engine itself catches request errors, so this
  is the last line of defence;
- `server_lib._HOST` set per server start (127.0.0.1 unless told otherwise);
- `token_utils.process_result_tokens` replaced by `process_result_tokens` below, which reads
  several decode steps per slot, keeps the stop token, and reports per-token log-probs, policy
  versions and a finish reason;
- `ActiveRequest.enqueue_samples` frees the slot of a request whose client went away, instead of
  decoding it to `max_tokens` for nobody;
- `AsyncMultifuture` tolerates a consumer whose event loop has already closed (its `close()` posts
  twice to the loop, and a client that finished after the first post and closed its loop made the
  second post raise and kill the detokenize thread).
"""

from __future__ import annotations

import dataclasses
import logging
import sys
import threading
import traceback
import types

import jax
import numpy as np

SERVE_EXTRA_HINT = ("serving needs the 'serve' extra and JetStream 0.2.2 without its dependencies:"
                    " pip install -e '.[serve]' && pip install --no-deps google-jetstream==0.2.2")


def _install_seqio_stand_in() -> None:
  try:
    import seqio  # noqa: F401  (a real seqio is fine too)
    return
  except ImportError:
    pass

  class _Unavailable:
    def __init__(self, *args, **kwargs):
      raise RuntimeError("seqio vocabularies are not available; toolorch engines bring their own"
                         " tokenizer")

  vocabularies = types.ModuleType("seqio.vocabularies")
  vocabularies.Vocabulary = type("Vocabulary", (_Unavailable,), {})
  vocabularies.SentencePieceVocabulary = type("SentencePieceVocabulary", (_Unavailable,), {})
  seqio = types.ModuleType("seqio")
  seqio.vocabularies = vocabularies
  sys.modules["seqio"] = seqio
  sys.modules["seqio.vocabularies"] = vocabularies


def _import_jetstream():
  root = logging.getLogger()
  level, handlers = root.level, list(root.handlers)
  _install_seqio_stand_in()
  try:
    from jetstream.core import orchestrator, server_lib
    from jetstream.core.proto import jetstream_pb2, jetstream_pb2_grpc
    from jetstream.core.utils import async_multifuture, return_sample
    from jetstream.engine import engine_api, token_utils, tokenizer_api, tokenizer_pb2
  except ImportError as err:
    raise ImportError(f"{SERVE_EXTRA_HINT} ({err})") from err
  finally:
    root.setLevel(level)
    for handler in list(root.handlers):
      if handler not in handlers:
        root.removeHandler(handler)
  return (orchestrator, server_lib, jetstream_pb2, jetstream_pb2_grpc, async_multifuture,
          return_sample, engine_api, token_utils, tokenizer_api, tokenizer_pb2)


(orchestrator, server_lib, jetstream_pb2, jetstream_pb2_grpc, async_multifuture, return_sample,
 engine_api, token_utils, tokenizer_api, tokenizer_pb2) = _import_jetstream()

logger = logging.getLogger("toolorch_jax.serving")
thread_failures: list[tuple[str, BaseException]] = []


def _delete_pytree(tree) -> None:
  for leaf in jax.tree.leaves(tree):
    if isinstance(leaf, jax.Array) and not leaf.is_deleted():
      leaf.delete()


class LoggingThread(threading.Thread):
  """A driver thread whose failure is logged and recorded instead of killing the process."""

  def run(self):
    try:
      super().run()
    except Exception as err:  # pylint: disable=broad-exception-caught
      logger.error("JetStream thread %s failed: %s\n%s", self.name, err, traceback.format_exc())
      thread_failures.append((self.name, err))


def _enqueue_samples(request, samples) -> None:
  channel = request.return_channel
  if channel is None or channel.cancelled():
    request.complete = np.ones_like(request.complete)  # the detokenizer then frees the slot
    return
  channel.add_result(samples)


def _post(future, item) -> None:
  try:
    future._loop.call_soon_threadsafe(future._queue.put_nowait, item)  # pylint: disable=protected-access
  except RuntimeError:  # the consumer's event loop is closed: nobody is listening any more
    pass


def _set_exception(future, exception: Exception) -> None:
  future._done.set()  # a threading.Event, safe from any thread  # pylint: disable=protected-access
  _post(future, async_multifuture._Exception(exception))  # pylint: disable=protected-access


async_multifuture.AsyncMultifuture.add_result = _post
async_multifuture.AsyncMultifuture.set_exception = _set_exception
orchestrator.delete_pytree = _delete_pytree
orchestrator.JetThread = LoggingThread
orchestrator.ActiveRequest.enqueue_samples = _enqueue_samples


@dataclasses.dataclass
class TokenSample(return_sample.ReturnSample):
  """A step's output for one sequence, with what RL and the HTTP server need beyond ids."""

  logprobs: list[float] = dataclasses.field(default_factory=list)
  versions: list[int] = dataclasses.field(default_factory=list)
  finish_reason: str | None = None  # stop | length | error, once the sequence is complete
  error: str | None = None


# Columns of the engine's ResultTokens.data beyond JetStream's token / valid / length.
COL_TOKEN, COL_VALID, COL_LENGTH, COL_VERSION, COL_LOGPROB, COL_STATUS = range(6)
STATUS_OK, STATUS_CACHE_FULL, STATUS_ERROR = 0, 1, 2


def process_result_tokens(tokenizer, slot: int, slot_max_length: int, result_tokens,
                          complete: np.ndarray, is_client_side_tokenization: bool = False,
                          debug: bool = False):
  """JetStream's per-slot result processing, keeping the stop token and adding log-probs,
  versions and a finish reason. The engine decodes several steps per dispatch: a slot's row of
  `result_tokens.data` is [steps, columns], read up to the sequence's end (the device stops the
  slot at the same token: stop id, `max_tokens`, full cache). One sample per slot, no speculation.
  """
  del debug
  if complete[0]:
    return [TokenSample(text=[], token_ids=[])], complete
  sample = TokenSample(text=[], token_ids=[])
  for row in np.asarray(result_tokens.data[slot]).reshape(-1, COL_STATUS + 1):
    status = int(row[COL_STATUS])
    if status == STATUS_ERROR or not row[COL_VALID]:
      sample.finish_reason = "error" if status == STATUS_ERROR else "length"
      if status == STATUS_ERROR:
        sample.error = getattr(tokenizer, "slot_error", lambda _: None)(slot)
      break
    token = int(row[COL_TOKEN])
    sample.token_ids.append(token)
    sample.logprobs.append(float(np.array(row[COL_LOGPROB], np.int32).view(np.float32)))
    sample.versions.append(int(row[COL_VERSION]))
    if not is_client_side_tokenization:
      sample.text.append(tokenizer.decode([token]))
    if token in tokenizer.stop_tokens:
      sample.finish_reason = "stop"
    elif row[COL_LENGTH] >= slot_max_length or status == STATUS_CACHE_FULL:
      sample.finish_reason = "length"
    if sample.finish_reason:
      break
  if hasattr(tokenizer, "slot_tokens"):
    tokenizer.slot_tokens(slot, sample.token_ids, sample.finish_reason)
  if sample.finish_reason:
    complete = np.ones_like(complete)
  return [sample], complete


token_utils.process_result_tokens = process_result_tokens


def start_grpc_server(driver, port: int, host: str = "127.0.0.1", threads: int = 64):
  """JetStream's gRPC server for `driver` on host:port (loopback unless told otherwise)."""
  server_lib._HOST = host  # read when the server binds its port
  server = server_lib.JetStreamServer(driver, threads, port, server_lib.grpc.insecure_server_credentials())
  server.start()
  return server
