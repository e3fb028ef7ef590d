"""Runs LocalStack in host mode, as `python -m localstack.runtime.main` does,
on the Python of the virtual environment (scripts/python-tools.sh localstack).

LocalStack's KMS names a key's material with uuid.uuid5 of bytes, which
Python accepts from 3.12 on; on an older Python (3.10, 3.11) CreateKey fails
with "encoding without a string argument". uuid5 is given bytes the way 3.12
takes them (SHA-1 of the namespace and the bytes), and strings as before.
"""

import hashlib
import runpy
import uuid

_uuid5 = uuid.uuid5


def _uuid5_of_bytes(namespace, name):
    if isinstance(name, bytes):
        digest = hashlib.sha1(namespace.bytes + name).digest()
        return uuid.UUID(bytes=digest[:16], version=5)
    return _uuid5(namespace, name)


uuid.uuid5 = _uuid5_of_bytes
runpy.run_module("localstack.runtime.main", run_name="__main__", alter_sys=True)
