# Builds what the package clients of the allow-list tests fetch, under ROOT, naming the server
# `HOST:PORT`:
#   hello.txt
#   pip:   simple/foo/ (a PEP 503 index) and files/foo-0.1-py3-none-any.whl
#   cargo: index/ (a sparse registry: config.json, 3/f/foo) and dl/foo/0.1.0/download
#   npm:   npm/foo (the packument) and npm/foo/-/foo-1.0.0.tgz
#
#   python3 net_fixtures.py ROOT HOST PORT
import base64
import hashlib
import io
import json
import os
import sys
import tarfile
import zipfile

root, host, port = sys.argv[1], sys.argv[2], sys.argv[3]
base = f"http://{host}:{port}"


def write(rel, data):
    path = os.path.join(root, rel)
    os.makedirs(os.path.dirname(path), exist_ok=True)
    with open(path, "wb") as f:
        f.write(data if isinstance(data, bytes) else data.encode())


def tar_gz(files):
    buf = io.BytesIO()
    with tarfile.open(fileobj=buf, mode="w:gz") as tar:
        for name, data in files.items():
            info = tarfile.TarInfo(name)
            info.size = len(data)
            info.mode = 0o644
            tar.addfile(info, io.BytesIO(data))
    return buf.getvalue()


write("hello.txt", "hello from outside\n")

# pip
wheel = io.BytesIO()
with zipfile.ZipFile(wheel, "w") as z:
    z.writestr("foo/__init__.py", "VALUE = 7\n")
    z.writestr("foo-0.1.dist-info/METADATA", "Metadata-Version: 2.1\nName: foo\nVersion: 0.1\n")
    z.writestr("foo-0.1.dist-info/WHEEL", "Wheel-Version: 1.0\nGenerator: test\nRoot-Is-Purelib: true\nTag: py3-none-any\n")
    z.writestr("foo-0.1.dist-info/RECORD", "")
wheel = wheel.getvalue()
write("files/foo-0.1-py3-none-any.whl", wheel)
digest = hashlib.sha256(wheel).hexdigest()
write("simple/index.html", '<html><body><a href="foo/">foo</a></body></html>\n')
write(
    "simple/foo/index.html",
    f'<html><body><a href="{base}/files/foo-0.1-py3-none-any.whl#sha256={digest}">foo-0.1-py3-none-any.whl</a></body></html>\n',
)

# cargo (a sparse registry)
crate = tar_gz({
    "foo-0.1.0/Cargo.toml": b'[package]\nname = "foo"\nversion = "0.1.0"\nedition = "2021"\n',
    "foo-0.1.0/src/lib.rs": b"pub fn seven() -> u32 { 7 }\n",
})
write("dl/foo/0.1.0/download", crate)
write("index/config.json", json.dumps({"dl": f"{base}/dl/{{crate}}/{{version}}/download"}))
entry = {"name": "foo", "vers": "0.1.0", "deps": [], "cksum": hashlib.sha256(crate).hexdigest(),
         "features": {}, "yanked": False}
write("index/3/f/foo", json.dumps(entry) + "\n")

# npm
tgz = tar_gz({"package/package.json": json.dumps({"name": "foo", "version": "1.0.0"}).encode(),
              "package/index.js": b"module.exports = 7;\n"})
write("npm/foo/-/foo-1.0.0.tgz", tgz)
integrity = "sha512-" + base64.b64encode(hashlib.sha512(tgz).digest()).decode()
packument = {
    "name": "foo",
    "dist-tags": {"latest": "1.0.0"},
    "versions": {"1.0.0": {"name": "foo", "version": "1.0.0", "description": "a test package",
                           "dist": {"tarball": f"{base}/npm/foo/-/foo-1.0.0.tgz",
                                    "shasum": hashlib.sha1(tgz).hexdigest(), "integrity": integrity}}},
}
write("npm/foo/index.html", json.dumps(packument))
