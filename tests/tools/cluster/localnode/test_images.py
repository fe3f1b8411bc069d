"""Tests for plumb_dev.cluster.localnode.images needing no root and no tools: keys, cache, loading,
errors."""

from __future__ import annotations

import os
import shutil
import socket
from collections.abc import Callable, Iterator
from pathlib import Path

import pytest

from plumb_dev.cluster.controlplane import building
from plumb_dev.cluster.localnode import images

PAUSE_SOURCE = building.hack_dir() / "images" / "pause"


@pytest.fixture
def cache(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    monkeypatch.setenv("PLUMB_CACHE_DIR", str(tmp_path / "cache"))
    return tmp_path / "cache" / "images"


@pytest.fixture
def no_tools(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """A PATH without go, buildah or mmdebstrap: any attempt to build fails loudly."""
    empty = tmp_path / "empty-bin"
    empty.mkdir()
    monkeypatch.setenv("PATH", str(empty))


@pytest.fixture
def pause_copy(tmp_path: Path) -> Path:
    return Path(shutil.copytree(PAUSE_SOURCE, tmp_path / "pause"))


@pytest.fixture
def context(tmp_path: Path) -> Path:
    directory = tmp_path / "context"
    directory.mkdir()
    (directory / "Containerfile").write_text("ARG BASE\nFROM ${BASE}\nCOPY app /app\n")
    (directory / "app").write_text("print('hello')\n")
    return directory


def test_the_public_surface_is_pinned() -> None:
    assert set(images.__all__) == {
        "MIRROR_ENV",
        "TEST_SCRIPT",
        "ImageArchive",
        "ImageError",
        "Recipe",
        "build",
        "build_recipe",
        "cache_dir",
        "content_key",
        "debian_base_recipe",
        "directory_inputs",
        "ensure_debian_base",
        "ensure_pause",
        "ensure_plumb_image",
        "ensure_python_base",
        "ensure_test_image",
        "load",
        "loaded",
        "pause_recipe",
    }


def test_cache_dir_is_under_plumb_cache_dir_or_the_home_cache(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("PLUMB_CACHE_DIR", str(tmp_path))
    assert images.cache_dir() == tmp_path / "images"
    monkeypatch.delenv("PLUMB_CACHE_DIR")
    monkeypatch.setenv("HOME", str(tmp_path / "home"))
    assert images.cache_dir() == tmp_path / "home" / ".cache" / "plumb" / "images"


def test_content_key_ignores_order_and_keeps_labels_apart_from_values() -> None:
    key = images.content_key({"a": b"1", "b": b"2"})
    assert key == images.content_key({"b": b"2", "a": b"1"})
    assert len(key) == 12
    assert int(key, 16) >= 0
    assert images.content_key({"ab": b"c"}) != images.content_key({"a": b"bc"})
    assert images.content_key({"a": b"1"}) != images.content_key({"a": b"1", "b": b""})


def test_the_image_of_a_recipe_is_tagged_and_named_by_its_key(tmp_path: Path) -> None:
    recipe = images.Recipe(name="thing", inputs={"x": b"1"})
    image = recipe.image(tmp_path)
    assert image.ref == f"localhost/plumb/thing:{recipe.key}"
    assert image.archive == tmp_path / f"thing-{recipe.key}.tar"
    assert image.key == recipe.key


def test_the_pause_key_ignores_where_the_source_is_and_its_timestamps(pause_copy: Path) -> None:
    original = images.pause_recipe(PAUSE_SOURCE).key
    for path in pause_copy.iterdir():
        os.utime(path, (0, 0))
    assert images.pause_recipe(pause_copy).key == original


def _append(name: str, text: str) -> Callable[[Path], None]:
    def edit(source: Path) -> None:
        with (source / name).open("a") as handle:
            handle.write(text)

    return edit


@pytest.mark.parametrize(
    "edit",
    [
        pytest.param(_append("main.go", "\n// another line\n"), id="main.go edited"),
        pytest.param(_append("go.mod", "\n// another line\n"), id="go.mod edited"),
        pytest.param(lambda source: (source / "main.go").chmod(0o600), id="mode changed"),
        pytest.param(lambda source: (source / "go.sum").write_text(""), id="file added"),
        pytest.param(
            lambda source: (source / "main.go").rename(source / "pause.go"), id="file renamed"
        ),
    ],
)
def test_the_pause_key_changes_with_any_input(
    pause_copy: Path, edit: Callable[[Path], None]
) -> None:
    # A rename drops main.go, which the recipe refuses; put a copy back so the key is computed.
    before = images.pause_recipe(pause_copy).key
    edit(pause_copy)
    if not (pause_copy / "main.go").exists():
        shutil.copy(PAUSE_SOURCE / "main.go", pause_copy / "main.go")
    assert images.pause_recipe(pause_copy).key != before


def test_the_pause_recipe_names_a_missing_source(tmp_path: Path) -> None:
    with pytest.raises(images.ImageError, match=r"main\.go does not exist"):
        images.pause_recipe(tmp_path)


def test_the_base_key_changes_with_the_mirror_and_not_otherwise() -> None:
    debian = images.debian_base_recipe(None).key
    assert images.debian_base_recipe(None).key == debian
    assert images.debian_base_recipe("http://mirror.invalid/debian").key != debian


def test_a_build_key_covers_the_context_the_base_and_the_arguments(
    context: Path, tmp_path: Path
) -> None:
    base = images.ImageArchive(ref="localhost/plumb/base:111111111111", archive=tmp_path / "b")
    other = images.ImageArchive(ref="localhost/plumb/base:222222222222", archive=tmp_path / "b")

    def key(
        *,
        on: images.ImageArchive | None = base,
        args: dict[str, str] | None = None,
        file: str | None = None,
    ) -> str:
        recipe = images.build_recipe(
            "app", containerfile_dir=context, base=on, build_args=args or {}, containerfile=file
        )
        return recipe.key

    first = key()
    assert key() == first
    assert key(on=other) != first
    assert key(on=None) != first
    assert key(args={"VERSION": "1"}) != key(args={"VERSION": "2"})
    assert key(file="Containerfile") != first
    (context / "app").write_text("print('changed')\n")
    assert key() != first


def test_directory_inputs_refuse_what_cannot_be_copied(tmp_path: Path) -> None:
    os.mkfifo(tmp_path / "pipe")
    with pytest.raises(images.ImageError, match=r"pipe is neither a file"):
        images.directory_inputs(tmp_path, label="context/")


def test_an_archive_present_is_reused_without_running_anything(cache: Path, no_tools: None) -> None:
    expected = images.pause_recipe(PAUSE_SOURCE).image(cache)
    cache.mkdir(parents=True)
    expected.archive.write_bytes(b"built earlier")
    assert images.ensure_pause() == expected
    assert expected.archive.read_bytes() == b"built earlier"


def test_an_interrupted_build_is_not_reused_and_a_missing_tool_is_named(
    cache: Path, no_tools: None, capsys: pytest.CaptureFixture[str]
) -> None:
    expected = images.pause_recipe(PAUSE_SOURCE).image(cache)
    interrupted = cache / ".build-pause-interrupted"
    interrupted.mkdir(parents=True)
    (interrupted / "image.tar").write_bytes(b"half an image")
    with pytest.raises(images.ImageError, match=r"`go` was not found .* install Go"):
        images.ensure_pause()
    assert not expected.archive.exists()
    assert "building image pause (first time only" in capsys.readouterr().err
    # The failed build's own work directory is gone; the interrupted one is left alone.
    assert [p.name for p in cache.glob(".build-*")] == [interrupted.name]


def test_build_refuses_a_bad_name_a_missing_base_and_a_second_base(
    cache: Path, context: Path, tmp_path: Path
) -> None:
    with pytest.raises(images.ImageError, match=r"'Plumb App' is not usable in a reference"):
        images.build("Plumb App", containerfile_dir=context, base=None)
    missing = images.ImageArchive(ref="localhost/plumb/base:0", archive=tmp_path / "none.tar")
    with pytest.raises(images.ImageError, match=r"none\.tar does not exist"):
        images.build("app", containerfile_dir=context, base=missing)
    with pytest.raises(images.ImageError, match=r"containerfile '../Dockerfile' is not a file"):
        images.build("app", containerfile_dir=context, base=None, containerfile="../Dockerfile")
    present = images.ImageArchive(ref="localhost/plumb/base:0", archive=context / "app")
    with pytest.raises(images.ImageError, match=r"BASE='elsewhere' given together with"):
        images.build(
            "app", containerfile_dir=context, base=present, build_args={"BASE": "elsewhere"}
        )


@pytest.fixture
def fake_socket(tmp_path: Path) -> Iterator[Path]:
    path = tmp_path / "containerd.sock"
    with socket.socket(socket.AF_UNIX) as listener:
        listener.bind(str(path))
        yield path


def _fake_ctr(directory: Path, *, lists_after_import: str) -> Path:
    """A ctr that records imports and lists what it was told to list once something is imported.

    Called as: ctr --address A --namespace N images (list --quiet | import FILE).
    """
    script = directory / "ctr"
    script.write_text(
        f"""#!/bin/sh
listed="{directory}/listed-$4"
case "$6" in
  list) cat "$listed" 2>/dev/null || true ;;
  import) echo "$7" >> "{directory}/imports"; echo "{lists_after_import}" >> "$listed" ;;
esac
"""
    )
    script.chmod(0o755)
    return script


def test_load_imports_an_image_once(tmp_path: Path, fake_socket: Path) -> None:
    image = images.ImageArchive(ref="localhost/plumb/pause:abc", archive=tmp_path / "p.tar")
    image.archive.write_bytes(b"archive")
    ctr = str(_fake_ctr(tmp_path, lists_after_import=image.ref))
    assert not images.loaded(image.ref, containerd_address=fake_socket, ctr=ctr)
    images.load(image, containerd_address=fake_socket, ctr=ctr)
    images.load(image, containerd_address=fake_socket, ctr=ctr)
    assert images.loaded(image.ref, containerd_address=fake_socket, ctr=ctr)
    assert (tmp_path / "imports").read_text().splitlines() == [str(image.archive)]
    assert not images.loaded(image.ref, containerd_address=fake_socket, namespace="x", ctr=ctr)


def test_load_says_when_the_archive_held_another_image(tmp_path: Path, fake_socket: Path) -> None:
    image = images.ImageArchive(ref="localhost/plumb/pause:abc", archive=tmp_path / "p.tar")
    image.archive.write_bytes(b"archive")
    ctr = str(_fake_ctr(tmp_path, lists_after_import="localhost/plumb/other:def"))
    with pytest.raises(images.ImageError, match=r"pause:abc is not listed there"):
        images.load(image, containerd_address=fake_socket, ctr=ctr)


def test_load_names_a_missing_archive(tmp_path: Path, fake_socket: Path) -> None:
    image = images.ImageArchive(ref="localhost/plumb/pause:abc", archive=tmp_path / "gone.tar")
    ctr = str(_fake_ctr(tmp_path, lists_after_import=image.ref))
    with pytest.raises(images.ImageError, match=r"gone\.tar of localhost/plumb/pause:abc does not"):
        images.load(image, containerd_address=fake_socket, ctr=ctr)


def test_loaded_names_the_failing_command_and_its_exit_code(fake_socket: Path) -> None:
    with pytest.raises(
        images.ImageError,
        match=r"`false --address \S+ --namespace k8s.io images list --quiet` "
        r"failed with exit code 1",
    ):
        images.loaded("x", containerd_address=fake_socket, ctr="false")


def test_loaded_names_a_missing_socket_and_a_missing_ctr(tmp_path: Path, fake_socket: Path) -> None:
    with pytest.raises(images.ImageError, match=r"no containerd socket at \S+nothing\.sock"):
        images.loaded("x", containerd_address=tmp_path / "nothing.sock")
    with pytest.raises(images.ImageError, match=r"no-ctr` was not found"):
        images.loaded("x", containerd_address=fake_socket, ctr=str(tmp_path / "no-ctr"))
