"""Test-wide setup: CPU only, 8 fake devices for sharding tests, data directory location; the
GCS emulator that gs:// tests (checkpoints, data directories) share."""

import os
import pathlib
import subprocess
import sys

import pytest

# Must happen before JAX is imported anywhere.
os.environ.setdefault("JAX_PLATFORMS", "cpu")
flags = os.environ.get("XLA_FLAGS", "")
if "xla_force_host_platform_device_count" not in flags:
  os.environ["XLA_FLAGS"] = (flags + " --xla_force_host_platform_device_count=8").strip()


@pytest.fixture(scope="module")
def gcs_emulator():
  """gcp-storage-emulator in its own process on loopback (tests/gcs_emulator.py says why it is not
  the emulator's own server), with orbax's three GCS clients pointed at it, here and in the
  processes a test starts: tensorstore (arrays), gcsfs behind etils' epath (folders and JSON) and
  google-cloud-storage (orbax's bucket lookup when it deletes old steps). Any metadata-server probe
  goes to loopback."""
  pytest.importorskip("gcp_storage_emulator",
                      reason="gs:// test needs the test extra (gcp-storage-emulator)")
  pytest.importorskip("gcsfs", reason="gs:// checkpoints need the gcs extra (gcsfs)")
  server = subprocess.Popen([sys.executable, str(pathlib.Path(__file__).with_name("gcs_emulator.py"))],
                            stdout=subprocess.PIPE, text=True)
  try:
    port = server.stdout.readline().strip()
    if not port:
      pytest.fail(f"the GCS emulator did not start (exit {server.wait()}; its errors are above)")
    url = f"http://127.0.0.1:{port}"
    with pytest.MonkeyPatch.context() as patch:
      for name, value in {
          "TENSORSTORE_GCS_HTTP_URL": url, "GOOGLE_AUTH_TOKEN_FOR_TESTING": "emulator",
          "STORAGE_EMULATOR_HOST": url, "GCE_METADATA_HOST": "127.0.0.1:9",
          "GCE_METADATA_IP": "127.0.0.1:9", "GCE_METADATA_ROOT": "127.0.0.1:9",
          "GCSFS_EXPERIMENTAL_ZB_HNS_SUPPORT": "false"}.items():
        patch.setenv(name, value)
      import fsspec
      import gcsfs.core

      # gcsfs's default class asks a gRPC control plane for the bucket layout, which the emulator
      # lacks (a 60 s timeout per call); its plain JSON-API class is what the emulator speaks.
      for protocol in ("gs", "gcs"):
        fsspec.register_implementation(protocol, gcsfs.core.GCSFileSystem, clobber=True)
      patch.setitem(fsspec.config.conf, "gcs", {"token": "anon"})
      yield "gs://bucket"
  finally:
    server.kill()
    server.communicate()
