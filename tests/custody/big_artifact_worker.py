"""Stream a big artifact into a store and back out, in this process; report memory and time.

Usage: ``python big_artifact_worker.py URL SPEC SIZE SEALED`` (SPEC ``-``: the bytes in the
store's database; SEALED ``1`` or ``0``). The store must exist (its tables made). Prints one
JSON line: the peak resident size before the put and at the end (KiB, see
:func:`peak_kib`; ``ru_maxrss`` too, for the record), and the seconds the put and the read
took.

The source makes its bytes as they are read (AES-CTR over zeros: incompressible, and far
faster than ``os.urandom``) and hashes them, so nothing here holds the artifact either; the
read hashes what it gets and checks it against the source's digest.
"""

from __future__ import annotations

import hashlib
import io
import json
import resource
import sys
import time
import uuid

from cryptography.hazmat.primitives.ciphers import Cipher, algorithms, modes

import actae
from actae.adapters.custody.artifacts import Artifacts, RefKeys
from actae.adapters.custody.blobs import blob_store
from actae.adapters.custody.refs import RefRecorder

READ_SIZE = 1 << 20


class Keystream(io.RawIOBase):
    """``size`` pseudo-random bytes, made as they are read, and their SHA-256."""

    def __init__(self, size: int) -> None:
        super().__init__()
        self.left = size
        self.hash = hashlib.sha256()
        self._cipher = Cipher(algorithms.AES(bytes(32)), modes.CTR(bytes(16))).encryptor()

    def readable(self) -> bool:
        return True

    def read(self, size: int = -1, /) -> bytes:
        count = self.left if size < 0 else min(size, self.left)
        data = self._cipher.update(bytes(count))
        self.left -= count
        self.hash.update(data)
        return data


def peak_kib() -> int:
    """This process's peak resident size since it started, in KiB.

    Linux's ``VmHWM`` counts this program only. ``ru_maxrss`` does not: it also keeps the
    peak of the process image that ``exec`` replaced, and a child forked from pytest starts
    with pytest's own size (about 100 MB), which would hide everything below it. So
    ``ru_maxrss`` serves only where there is no ``/proc``.
    """
    try:
        with open("/proc/self/status") as status:
            for line in status:
                if line.startswith("VmHWM:"):
                    return int(line.split()[1])
    except OSError:
        pass
    peak = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss
    return peak // 1024 if sys.platform == "darwin" else peak  # macOS counts bytes


def main() -> None:
    url, spec, size_text, sealed_text = sys.argv[1:5]
    size, key = int(size_text), bytes(range(32)) if sealed_text == "1" else None
    keys = RefKeys("k", {"k": bytes(32)})
    store = actae.open(url, create=False)
    tables = store._backend.tables()
    artifacts = Artifacts(
        blob_store(None if spec == "-" else spec, tables), RefRecorder(tables), keys
    )
    baseline = peak_kib()

    started = time.perf_counter()
    source = Keystream(size)
    ref = artifacts.put(uuid.uuid4(), source, media_type="application/octet-stream", data_key=key)
    put_seconds = time.perf_counter() - started

    started = time.perf_counter()
    received, count = hashlib.sha256(), 0
    with artifacts.open(ref, data_key=key) as stream:
        while chunk := stream.read(READ_SIZE):
            received.update(chunk)
            count += len(chunk)
    read_seconds = time.perf_counter() - started
    store.close()

    assert count == ref.size == size
    assert ref.digest == source.hash.hexdigest() == received.hexdigest()
    report = {
        "baseline_kib": baseline,
        "peak_kib": peak_kib(),
        "ru_maxrss": resource.getrusage(resource.RUSAGE_SELF).ru_maxrss,
        "put_seconds": round(put_seconds, 2),
        "read_seconds": round(read_seconds, 2),
    }
    print(json.dumps(report), flush=True)


if __name__ == "__main__":
    main()
