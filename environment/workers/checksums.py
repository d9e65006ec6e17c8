"""Checksums that a host process and the evaluator compute alike (standard library only: hosts run in other
interpreters, such as LeRobot's own venv)."""

import hashlib
from pathlib import Path


def folder_sha256(folder: Path) -> str:
    """sha256 over a folder's files in name order: each relative name, a NUL, the sha256 of its bytes, a newline.
    Any file added, removed, renamed or edited changes it."""
    digest = hashlib.sha256()
    for path in sorted(p for p in Path(folder).rglob("*") if p.is_file()):
        file_hash = hashlib.sha256(path.read_bytes()).hexdigest()
        digest.update(f"{path.relative_to(folder).as_posix()}\0{file_hash}\n".encode())
    return digest.hexdigest()
