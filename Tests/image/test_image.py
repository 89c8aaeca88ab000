"""The OCI image (SPEC §6), checked as a user would: oci-image-tool validates the layout, skopeo
shows the config, the image unpacked by umoci (rootless) runs under unshare + chroot and answers
/healthz and a sign-in, and a second build of the same commit has the same digest.

scripts/test builds the image twice (IMAGE_DIR and IMAGE_DIR_AGAIN) with the release binary."""

import glob
import json
import os
import shutil
import signal
import socket
import ssl
import subprocess
import tarfile
import time
import urllib.error
import urllib.parse
import urllib.request

import pytest

IMAGE_DIR = os.environ.get("IMAGE_DIR", "")
IMAGE_DIR_AGAIN = os.environ.get("IMAGE_DIR_AGAIN", "")


@pytest.fixture(scope="module")
def image():
    if not IMAGE_DIR:
        pytest.fail("IMAGE_DIR is not set: scripts/test's image stage builds the image and sets it")
    layout = os.path.join(IMAGE_DIR, "oci")
    with open(os.path.join(layout, "index.json")) as file:
        index = json.load(file)
    tags = sorted(m["annotations"]["org.opencontainers.image.ref.name"] for m in index["manifests"])
    version = next(tag for tag in tags if tag != "latest")
    # skopeo names an OCI layout's image `oci:DIR:TAG`; umoci, `DIR:TAG`.
    return {"layout": layout, "version": version, "tags": tags, "reference": f"oci:{layout}:{version}", "umoci": f"{layout}:{version}"}


def run(*command, **options):
    return subprocess.run(command, check=True, capture_output=True, text=True, timeout=300, **options)


def free_port():
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        return probe.getsockname()[1]


def test_the_layout_is_valid_and_tagged(image, tmp_path):
    result = run("oci-image-tool", "validate", "--type", "image", image["layout"])
    assert "validation succeeded" in (result.stdout + result.stderr).lower()
    assert image["tags"] == sorted([image["version"], "latest"])
    # The validator does look: a layout whose manifest lost a byte fails it.
    broken = tmp_path / "broken"
    shutil.copytree(image["layout"], broken)
    with open(broken / "index.json") as file:
        digest = json.load(file)["manifests"][0]["digest"].split(":", 1)[1]
    manifest = broken / "blobs" / "sha256" / digest
    manifest.write_bytes(manifest.read_bytes()[:-1])
    refused = subprocess.run(["oci-image-tool", "validate", "--type", "image", str(broken)], capture_output=True, text=True, timeout=300)
    assert refused.returncode != 0


def test_skopeo_shows_the_config(image):
    config = json.loads(run("skopeo", "inspect", "--config", image["reference"]).stdout)
    settings = config["config"]
    assert config["os"] == "linux" and config["architecture"] == "amd64"
    assert settings["Entrypoint"] == ["/usr/local/bin/todo-server"] and settings["Cmd"] == ["serve"]
    assert settings["User"] == "10001:10001", "not root"
    assert set(settings["ExposedPorts"]) == {"5080/tcp", "3000/tcp"}
    assert set(settings["Volumes"]) == {"/data"} and settings["WorkingDir"] == "/data"
    env = dict(entry.split("=", 1) for entry in settings["Env"])
    assert env["TODO_DATA_DIR"] == "/data" and env["TODO_HOST"] == "0.0.0.0" and env["TODO_TLS"] == "1"
    assert env["TODO_IDENTITY_PORT"] == "5080" and env["TODO_API_PORT"] == "3000"
    assert settings["Labels"]["org.opencontainers.image.version"] == image["version"]
    summary = json.loads(run("skopeo", "inspect", image["reference"]).stdout)
    assert len(summary["Layers"]) == 1


def test_the_root_filesystem_is_minimal(image, tmp_path):
    bundle = tmp_path / "bundle"
    run("umoci", "unpack", "--rootless", "--image", image["umoci"], str(bundle))
    rootfs = bundle / "rootfs"
    files = sorted(str(path.relative_to(rootfs)) for path in rootfs.rglob("*") if path.is_file() and not path.is_symlink())
    bundles = [name for name in files if name.startswith("usr/local/bin/TodoB2C_")]
    assert any(name.endswith("openapi.json") for name in bundles), "the resource bundles are beside the binary"
    files = [name for name in files if name not in bundles]
    # The binary, glibc and the C++ runtime, libcrypto, CA certificates, the user and name files.
    assert "usr/local/bin/todo-server" in files and "etc/ssl/certs/ca-certificates.crt" in files
    assert not any("libswift" in name or "libFoundation" in name for name in files), "the Swift runtime is linked in"
    assert not any(name.startswith(("bin/", "usr/bin/", "sbin/")) for name in files), "no shell, no tools"
    assert len(files) < 30, files
    assert "todo:x:10001:10001" in (rootfs / "etc" / "passwd").read_text()
    # Mozilla's roots as Debian ships them, not the build machine's own additions.
    bundle = (rootfs / "etc" / "ssl" / "certs" / "ca-certificates.crt").read_text()
    roots = [name for name in os.listdir("/usr/share/ca-certificates/mozilla") if name.endswith(".crt")]
    assert bundle.count("BEGIN CERTIFICATE") == len(roots) > 100
    for local in glob.glob("/usr/local/share/ca-certificates/*.crt"):
        body = "".join(open(local).read().split("-----")[2].split())
        assert body[:200] not in "".join(bundle.split()), f"{local} is in the image"
    # The layer as written: /data belongs to the image's user, only to it; nothing else does.
    manifest = json.loads(run("skopeo", "inspect", "--raw", image["reference"]).stdout)
    digest = manifest["layers"][0]["digest"].split(":", 1)[1]
    with tarfile.open(os.path.join(image["layout"], "blobs", "sha256", digest)) as layer:
        owners = {member.name: (member.uid, member.mode) for member in layer.getmembers()}
    assert owners["data"] == (10001, 0o700)
    assert {name for name, (uid, _) in owners.items() if uid != 0} == {"data"}


def image_process(image):
    """The image's command and environment, as `docker run -e` would give them: other ports than
    the defaults (another test may hold those)."""
    settings = json.loads(run("skopeo", "inspect", "--config", image["reference"]).stdout)["config"]
    identity_port, api_port = free_port(), free_port()
    while api_port == identity_port:
        api_port = free_port()
    env = dict(entry.split("=", 1) for entry in settings["Env"])
    env.update(TODO_IDENTITY_PORT=str(identity_port), TODO_API_PORT=str(api_port))
    return settings["Entrypoint"] + settings["Cmd"], env, identity_port, api_port


def jail(rootfs, rootless=True, user=None):
    """unshare + chroot as a runtime runs a container: a /proc of the new PID namespace and /dev
    (the host's, bound) mounted in the image's mount points; the host's network namespace, so
    the listener on 0.0.0.0 is reached on loopback. The host's tools by absolute path: the
    environment (PATH too) is the image's."""
    unshare = [shutil.which("unshare"), *(["--user", "--map-root-user"] if rootless else []), "--mount", "--pid", "--fork",
               f"--mount-proc={rootfs}/proc"]
    chroot = [shutil.which("chroot"), *([f"--userspec={user}"] if user else [])]
    return [*unshare, shutil.which("sh"), "-c", 'mount --rbind /dev "$0/dev" && exec "$@"', rootfs, *chroot, rootfs]


def serve_and_sign_in(rootfs, jailed, command, env, identity_port, api_port):
    """Starts the image's command in the jail; checks /healthz over the TLS it made, that the
    test-control surface is off, a B2C_1_ROPC sign-in of a user the same binary added, and the
    Task API with that token."""
    server = subprocess.Popen(jailed + command, env=env, cwd=rootfs, stdout=subprocess.PIPE, stderr=subprocess.STDOUT,
                              start_new_session=True)
    try:
        ca = os.path.join(rootfs, "data", "tls", "ca.pem")
        deadline = time.monotonic() + 90
        answered = None
        while time.monotonic() < deadline and answered is None:
            assert server.poll() is None, server.stdout.read().decode(errors="replace")
            try:
                context = ssl.create_default_context(cafile=ca)
                with urllib.request.urlopen(f"https://localhost:{identity_port}/healthz", context=context, timeout=5) as answer:
                    answered = answer.status
            except (OSError, ssl.SSLError):
                time.sleep(0.5)
        assert answered == 200
        # Not a machine-local server: no outbox, no token minting.
        with pytest.raises(urllib.error.HTTPError) as missing:
            urllib.request.urlopen(f"https://localhost:{identity_port}/dev/outbox", context=context, timeout=30)
        assert missing.value.code == 404
        with open(os.path.join(rootfs, "data", "settings.json")) as file:
            client = json.load(file)["clientId"]
        add = subprocess.run(
            jailed + [command[0], "users", "add", "--data-dir", "/data", "--email", "image@example.com", "--name", "Image",
                      "--password-stdin"],
            env=env, input="Image-Passw0rd\n", capture_output=True, text=True, timeout=120)
        assert add.returncode == 0, add.stderr
        form = urllib.parse.urlencode({
            "grant_type": "password", "client_id": client, "username": "image@example.com", "password": "Image-Passw0rd",
            "scope": f"openid {client}"}).encode()
        url = f"https://localhost:{identity_port}/todob2c.onmicrosoft.com/B2C_1_ROPC/oauth2/v2.0/token"
        try:
            with urllib.request.urlopen(urllib.request.Request(url, data=form), context=context, timeout=30) as answer:
                tokens = json.loads(answer.read())
        except urllib.error.HTTPError as refused:
            pytest.fail(f"the sign-in was refused: {refused.code} {refused.read().decode(errors='replace')}")
        assert tokens["token_type"] == "Bearer" and tokens["access_token"].count(".") == 2
        # The Task API of the same container takes the token.
        request = urllib.request.Request(f"https://localhost:{api_port}/api/tasks", headers={"Authorization": "Bearer " + tokens["access_token"]})
        with urllib.request.urlopen(request, context=context, timeout=30) as answer:
            assert answer.status == 200
    finally:
        if server.poll() is None:
            os.killpg(server.pid, signal.SIGTERM)
            try:
                server.wait(timeout=30)
            except subprocess.TimeoutExpired:
                os.killpg(server.pid, signal.SIGKILL)
                server.wait()


def test_the_unpacked_image_runs_and_signs_in(image, tmp_path):
    """The rootless unpack (umoci unpack --rootless), run under unshare + chroot as root of a
    user namespace."""
    bundle = tmp_path / "bundle"
    run("umoci", "unpack", "--rootless", "--image", image["umoci"], str(bundle))
    rootfs = str(bundle / "rootfs")
    command, env, identity_port, api_port = image_process(image)
    # Without /dev (no /dev/urandom) the binary refuses to start: Foundation's ids would all be zero.
    bare = [shutil.which("unshare"), "--user", "--map-root-user", "--mount", "--pid", "--fork", f"--mount-proc={rootfs}/proc",
            shutil.which("chroot"), rootfs]
    refused = subprocess.run(bare + command, env=env, capture_output=True, text=True, timeout=60)
    assert refused.returncode == 70 and "no random source" in refused.stderr, refused.stderr
    serve_and_sign_in(rootfs, jail(rootfs), command, env, identity_port, api_port)


def test_the_image_runs_as_its_user(image, tmp_path):
    """Unpacked with its owners (umoci unpack as root: scripts/test runs as root, as CI does) and
    run as the image's user, 10001: the data directory it owns is where it writes."""
    assert os.geteuid() == 0, "unpacking with owners and switching to user 10001 needs root (CI runs scripts/test as root)"
    bundle = tmp_path / "bundle"
    run("umoci", "unpack", "--image", image["umoci"], str(bundle))
    rootfs = str(bundle / "rootfs")
    data = os.stat(os.path.join(rootfs, "data"))
    assert (data.st_uid, data.st_mode & 0o777) == (10001, 0o700)
    command, env, identity_port, api_port = image_process(image)
    user = json.loads(run("skopeo", "inspect", "--config", image["reference"]).stdout)["config"]["User"]
    serve_and_sign_in(rootfs, jail(rootfs, rootless=False, user=user), command, env, identity_port, api_port)
    # What the server wrote belongs to the user, not to root.
    owners = {os.stat(os.path.join(directory, name)).st_uid
              for directory, _, names in os.walk(os.path.join(rootfs, "data")) for name in names}
    assert owners == {10001}


def test_two_builds_of_one_commit_have_one_digest(image):
    if not IMAGE_DIR_AGAIN:
        pytest.fail("IMAGE_DIR_AGAIN is not set: scripts/test builds the image a second time")
    digests = [open(os.path.join(directory, "digest")).read().strip() for directory in (IMAGE_DIR, IMAGE_DIR_AGAIN)]
    assert digests[0].startswith("sha256:") and digests[0] == digests[1]
    again = json.loads(run("skopeo", "inspect", f"oci:{IMAGE_DIR_AGAIN}/oci:{image['version']}").stdout)
    assert again["Digest"] == digests[0]


def test_the_archives_load_as_docker_and_podman_expect(image):
    with tarfile.open(os.path.join(IMAGE_DIR, "todo-b2c-docker.tar")) as archive:
        manifest = json.load(archive.extractfile("manifest.json"))
        # skopeo writes the name fully qualified, as `docker save` does; `docker load` lists it as todo-b2c.
        assert manifest[0]["RepoTags"] == [f"docker.io/library/todo-b2c:{image['version']}"]
        assert all(layer in archive.getnames() for layer in manifest[0]["Layers"])
    with tarfile.open(os.path.join(IMAGE_DIR, "todo-b2c-oci.tar")) as archive:
        names = archive.getnames()
        assert "oci-layout" in names and "index.json" in names
        index = json.load(archive.extractfile("index.json"))
        assert index["manifests"][0]["annotations"]["org.opencontainers.image.ref.name"] == f"todo-b2c:{image['version']}"
    # skopeo reads both back as the same image.
    for transport in (f"docker-archive:{IMAGE_DIR}/todo-b2c-docker.tar", f"oci-archive:{IMAGE_DIR}/todo-b2c-oci.tar"):
        config = json.loads(run("skopeo", "inspect", "--config", transport).stdout)
        assert config["config"]["User"] == "10001:10001"
