"""The fs tools' rule for files with more than one hard link.

Confinement is by path, and a hard link has no path of its own to check: a link inside the root to a file outside
shares that file's inode, so writing through it changes the outside file and reading it reads that file. Nothing
about the link says where its other names are. So write and edit refuse a regular file whose link count is above
one, unless this server created that file itself (it then knows the content came from inside), and read and grep
still return such a file's text but say what it may be. Delete is allowed: it removes only the name inside the
root, never the other names.
"""

from __future__ import annotations

import os
import stat
import threading

from mcp.server.mcpserver.exceptions import ToolError

__all__ = ["HardLinks"]


class HardLinks:
    """Which files this server created, and the messages for files with several hard links.

    One instance is shared by all tools of a server, so a file written by ``write`` may later be edited even if
    something else has linked it since. Files are identified by ``(st_dev, st_ino)``.
    """

    def __init__(self) -> None:
        self._created: set[tuple[int, int]] = set()
        # Tools run in worker threads, so two calls can update the set at once.
        self._lock = threading.Lock()

    def created(self, info: os.stat_result) -> None:
        """Remember a file this server has just created.

        Args:
            info: The new file's status (from ``fstat`` on the descriptor that created it).
        """
        with self._lock:
            self._created.add((info.st_dev, info.st_ino))

    def deleted(self, info: os.stat_result) -> None:
        """Forget a file this server deleted, so an inode number reused later is not trusted.

        Args:
            info: The status the file had before it was deleted.
        """
        with self._lock:
            self._created.discard((info.st_dev, info.st_ino))

    def extra_links(self, info: os.stat_result) -> int:
        """How many hard links a file has that make it suspect: 0 if it has one, or if this server created it.

        Args:
            info: The file's status.

        Returns:
            The link count when it is above one and the file is not this server's own, else 0.
        """
        if not stat.S_ISREG(info.st_mode) or info.st_nlink <= 1:
            return 0
        with self._lock:
            if (info.st_dev, info.st_ino) in self._created:
                return 0
        return info.st_nlink

    def refuse_write(self, info: os.stat_result, shown: str) -> None:
        """Refuse to change a file whose other hard links may be outside the roots.

        Args:
            info: The file's status, from ``fstat`` on the descriptor that would be written.
            shown: The path as the model sees it.

        Raises:
            ToolError: If the file has more than one hard link and this server did not create it.
        """
        if links := self.extra_links(info):
            raise ToolError(
                f"{shown!r} has {links} hard links, so it may be a file outside the workspace; Loom does not write "
                f"through hard links — copy it or remove the link"
            )

    def read_note(self, info: os.stat_result) -> str | None:
        """The note a read of this file carries, if it has hard links that make it suspect.

        Args:
            info: The file's status, from ``fstat`` on the descriptor that was read.

        Returns:
            The note, or None.
        """
        if links := self.extra_links(info):
            return f"the file has {links} hard links, so it may be a file outside the workspace"
        return None
