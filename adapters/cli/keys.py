"""``actae keys new`` and ``actae keys rotate``: the keyring that encrypts a store at rest.

``new`` writes a keyring file with one master key; pass it to ``actae.open(url,
keyring=path)`` or put ``?keyring=path`` in the store URL. ``rotate`` adds a master key to
the file, makes it current, and re-wraps every run's data key under it (payloads are not
touched). See docs/operations.md for key management and backups.
"""

from __future__ import annotations

from pathlib import Path

import click

from actae.adapters.cli.opening import invocation
from actae.adapters.cli.options import as_json, store_options
from actae.adapters.cli.printing import console, print_json
from actae.adapters.custody.keyring import load_keyring, new_keyring, save_keyring
from actae.adapters.runtime.store import open as open_store


@click.group(help="Make and rotate the keyring that encrypts a store at rest.")
def keys() -> None:
    """The ``keys`` command group."""


@keys.command(
    "new",
    help="Write a new keyring file with one master key (mode 0600; never overwrites). Keep "
    "it apart from the database and its backups: a backup is only restorable with it.",
)
@click.option("--out", required=True, metavar="PATH", help="where to write the keyring")
@as_json
def new(out: str, as_json: bool) -> None:
    """Write a fresh keyring to ``out``."""
    keyring = new_keyring()
    save_keyring(keyring, out, replace=False)
    if as_json:
        print_json({"keyring": out, "current": keyring.current})
        return
    console().print(f"wrote {out} with master key {keyring.current}")
    console().print(f"open the store with ?keyring={Path(out).resolve()} (or keyring=)")


@keys.command(
    "rotate",
    help="Add a master key to the keyring, make it current, and re-wrap every run's data "
    "key under it. Payloads are not touched; safe to run while workers write and to run "
    "again after an interruption. The old keys stay in the file (references signed with "
    "them are still checked with them).",
)
@click.option("--keyring", "keyring_path", required=True, metavar="PATH", help="the keyring file")
@store_options(required=True)
@as_json
def rotate(keyring_path: str, as_json: bool) -> None:
    """Rotate the master key of the store at ``--db``."""
    url = invocation().required_url()
    rotated = load_keyring(keyring_path).with_new_key()
    with open_store(url, keyring=keyring_path, create=False):
        pass  # the store opens with the current keyring before the file changes
    save_keyring(rotated, keyring_path, replace=True)
    with open_store(url, keyring=keyring_path, create=False) as store:
        count = store.rotate_keys()
    if as_json:
        print_json({"keyring": keyring_path, "current": rotated.current, "rewrapped": count})
        return
    console().print(f"master key {rotated.current} is current in {keyring_path}")
    console().print(f"re-wrapped {count} data key{'s' if count != 1 else ''}")


COMMANDS: list[click.Command] = [keys]
