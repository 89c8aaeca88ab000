#!/usr/bin/env python3
"""The image's one layer, as an uncompressed tar (scripts/image adds it with `umoci raw add-layer`).

A minimal root filesystem (SPEC §6): the binary and its resource bundles, the shared libraries it loads (ldd's list, and
OpenSSL 3's libcrypto, which the token signer opens with dlopen when it is there), CA
certificates, name-service files, a non-root user `todo` (10001) owning `/data`, and `/tmp`.

Reproducible: entries in a fixed order, every time SOURCE_DATE_EPOCH, owners and modes set here
rather than read from this machine, so one binary and one epoch give one byte-identical tar.
"""

import argparse
import io
import os
import re
import subprocess
import sys
import tarfile

USER_ID = 10001
PASSWD = "root:x:0:0:root:/root:/usr/sbin/nologin\ntodo:x:10001:10001:TodoB2C:/data:/usr/sbin/nologin\n"
GROUP = "root:x:0:\ntodo:x:10001:\n"
# glibc resolves names through these: "localhost" (a PostgreSQL URL, --public-url) from the files.
NSSWITCH = "passwd: files\ngroup: files\nhosts: files dns\n"
HOSTS = "127.0.0.1 localhost\n::1 localhost ip6-localhost ip6-loopback\n"
CA_BUNDLE = "/etc/ssl/certs/ca-certificates.crt"
# Debian's copy of Mozilla's root store. Not the build machine's /etc/ssl/certs bundle, which
# also holds whatever CAs its administrator added (a company's, an intercepting proxy's): every
# container would trust them.
MOZILLA_ROOTS = "/usr/share/ca-certificates/mozilla"


def ca_bundle():
    names = sorted(name for name in os.listdir(MOZILLA_ROOTS) if name.endswith(".crt"))
    # Roots Debian deselected (`!mozilla/…` in /etc/ca-certificates.conf) stay out, as update-ca-certificates leaves them out.
    try:
        with open("/etc/ca-certificates.conf", encoding="utf-8") as conf:
            deselected = {line.strip()[len("!mozilla/"):] for line in conf if line.strip().startswith("!mozilla/")}
    except OSError:
        deselected = set()
    names = [name for name in names if name not in deselected]
    if not names:
        sys.exit(f"image: no CA certificates in {MOZILLA_ROOTS} (install ca-certificates)")
    parts = []
    for name in names:
        with open(os.path.join(MOZILLA_ROOTS, name), "rb") as source:
            parts.append(source.read().strip() + b"\n")
    return b"".join(parts)


def linked(path):
    """The absolute paths ldd resolves for `path` (the loader included)."""
    listing = subprocess.run(["ldd", path], check=True, capture_output=True, text=True).stdout
    paths = []
    for line in listing.splitlines():
        if "not found" in line:
            sys.exit(f"image: {path} needs a library this machine lacks: {line.strip()}")
        match = re.search(r"(?:=>\s*)?(/\S+)\s+\(0x", line)
        if match:
            paths.append(match.group(1))
    return paths


def shared_libraries(binary):
    """What the binary links, and Debian's libcrypto.so.3 with what it links (the signer opens
    it with dlopen, so ldd does not list it)."""
    paths = linked(binary)
    # The multiarch directory the binary's own libc is in.
    libc = next((path for path in paths if os.path.basename(path).startswith("libc.so")), None)
    if libc is None:
        sys.exit(f"image: ldd lists no libc for {binary}")
    crypto = os.path.join(os.path.dirname(os.path.realpath(libc)), "libcrypto.so.3")
    if not os.path.exists(crypto):
        sys.exit(f"image: {crypto} is missing (install libssl3): the token signer is faster with it")
    return sorted(set(paths + [crypto] + linked(crypto)))


class Layer:
    """Adds entries with fixed metadata; parents first, each once."""

    def __init__(self, archive, epoch):
        self.archive, self.epoch, self.seen = archive, epoch, set()

    def _info(self, name, kind, mode, owner=0):
        info = tarfile.TarInfo(name.lstrip("/"))
        info.type, info.mode, info.mtime = kind, mode, self.epoch
        info.uid = info.gid = owner
        info.uname = info.gname = "todo" if owner == USER_ID else "root"
        return info

    def directory(self, path, mode=0o755, owner=0):
        parts = path.strip("/").split("/")
        for depth in range(1, len(parts) + 1):
            name = "/".join(parts[:depth])
            if name in self.seen:
                continue
            self.seen.add(name)
            last = depth == len(parts)
            self.archive.addfile(self._info(name, tarfile.DIRTYPE, mode if last else 0o755, owner if last else 0))

    def file(self, path, data, mode=0o644):
        if path.strip("/") in self.seen:
            return
        self.seen.add(path.strip("/"))
        self.directory(os.path.dirname(path))
        info = self._info(path, tarfile.REGTYPE, mode)
        info.size = len(data)
        self.archive.addfile(info, io.BytesIO(data))

    def link(self, path, target):
        self.directory(os.path.dirname(path))
        info = self._info(path, tarfile.SYMTYPE, 0o777)
        info.linkname = target
        self.archive.addfile(info)


def main():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--binary", required=True)
    parser.add_argument("--epoch", type=int, required=True)
    parser.add_argument("--out", required=True)
    arguments = parser.parse_args()

    with tarfile.open(arguments.out, "w", format=tarfile.PAX_FORMAT) as archive:
        layer = Layer(archive, arguments.epoch)
        # Debian's merged /usr: /lib and /lib64 are links into /usr, as the loader path expects.
        layer.link("lib", "usr/lib")
        layer.link("lib64", "usr/lib64")
        layer.seen.update({"lib", "lib64"})
        for library in shared_libraries(arguments.binary):
            real = os.path.realpath(library)
            target = library
            for prefix in ("/lib/", "/lib64/"):
                if target.startswith(prefix):
                    target = "/usr" + target
            with open(real, "rb") as source:
                layer.file(target, source.read(), 0o755)
        with open(arguments.binary, "rb") as source:
            layer.file("/usr/local/bin/todo-server", source.read(), 0o755)
        # Its resource bundles (pages, templates, the OpenAPI document) beside it, where
        # Bundle.module looks first: without them the server stops at its first page.
        home = os.path.dirname(os.path.abspath(arguments.binary))
        bundles = sorted(name for name in os.listdir(home) if name.endswith(".resources"))
        if not bundles:
            sys.exit(f"image: no *.resources bundles beside {arguments.binary} (scripts/release copies them)")
        for bundle in bundles:
            # Sorted whole: one order whatever the file system's.
            for directory, _, names in sorted(os.walk(os.path.join(home, bundle))):
                relative = os.path.relpath(directory, home)
                layer.directory("/usr/local/bin/" + relative)
                for name in sorted(names):
                    with open(os.path.join(directory, name), "rb") as source:
                        layer.file(f"/usr/local/bin/{relative}/{name}", source.read())
        layer.file(CA_BUNDLE, ca_bundle())
        for path, text in (("/etc/passwd", PASSWD), ("/etc/group", GROUP), ("/etc/nsswitch.conf", NSSWITCH), ("/etc/hosts", HOSTS)):
            layer.file(path, text.encode())
        layer.directory("/data", 0o700, USER_ID)
        layer.directory("/tmp", 0o1777)
        # Mount points the runtime fills: Foundation finds the binary (and so its bundles)
        # through /proc/self/exe.
        for mount_point in ("/dev", "/proc", "/sys"):
            layer.directory(mount_point)


if __name__ == "__main__":
    main()
