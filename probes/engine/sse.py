"""Incremental Server-Sent Events parser (WHATWG HTML, "Parsing an event stream").

Bytes in, events out. The parser never decodes text: it splits on line ends (LF, CR or
CRLF, which are ASCII and so never occur inside a multi-byte UTF-8 sequence) and hands
each event's data to the dialect as ``bytes``, which ``orjson`` parses directly. A UTF-8
character split across two reads therefore needs no special care.

It is on the hot path (one call per socket read, up to ~10^5 events/s), so it trades a
little elegance for speed: line ends are normalised per chunk with ``bytes.replace``
instead of a character loop, and the common ``data:`` line is tested first.
"""

from __future__ import annotations

from collections.abc import Callable

# on_event(event_type, data, t_ns): event_type is None for the default "message" type.
EventSink = Callable[[bytes | None, bytes, int], None]
CommentSink = Callable[[int], None]

_BOM = b"\xef\xbb\xbf"


class EventTooLarge(Exception):
    """One event (or one unterminated line) grew beyond the configured limit."""


class TooManyEvents(EventTooLarge):
    """The response held more events and comment lines than the configured limit."""


class TooManyLines(EventTooLarge):
    """The response held more lines (blank ones too) than the configured limit."""


# What one line costs beyond its bytes: a data line is kept as its own bytes object until
# its event is dispatched (~33 bytes of header, a list slot, the join), so an event made
# of millions of one-byte ``data:`` lines must pass the event limit long before 4 MiB of
# payload (it held +286 MB before this was counted).
LINE_OVERHEAD_BYTES = 64


class SSEParser:
    """Feed raw body bytes with the timestamp of the read that delivered them.

    Every event completed by a chunk is dispatched with that chunk's timestamp: the
    earliest moment our code could have seen it (metrics.md, "Clock and events").
    """

    __slots__ = (
        "_on_event",
        "_on_comment",
        "_max_event_bytes",
        "_max_events",
        "_max_lines",
        "_parts",
        "_parts_len",
        "_data",
        "_data_len",
        "_event",
        "_pending_cr",
        "_started",
        "events",
        "comments",
        "lines",
        "last_event_id",
        "incomplete_event_discarded",
    )

    def __init__(
        self,
        on_event: EventSink,
        on_comment: CommentSink | None = None,
        max_event_bytes: int = 4 * 1024 * 1024,
        max_events: int = 200_000,
        max_lines: int = 800_000,
    ) -> None:
        self._on_event = on_event
        self._on_comment = on_comment
        self._max_event_bytes = max_event_bytes
        # Events and comment lines together: a keep-alive flood is bounded in count (and
        # so in work) like a huge event is in bytes. Checked once per chunk, which holds
        # at most a read's worth of lines.
        self._max_events = max_events
        # Every line, blank ones included, costs a turn of the loop below: 32 MiB of blank
        # lines was ~4 s of the worker's shared loop. Checked before a chunk's lines are
        # walked, so a flood is refused before it costs anything but the split.
        self._max_lines = max_lines
        # An unterminated line carried over to the next chunk, kept as the reads that
        # brought it: joined once, when its line end arrives (appending each read to one
        # buffer copied a long line again on every read: 2.4 s of CPU per 32 MiB).
        self._parts: list[bytes] = []
        self._parts_len = 0
        self._data: list[bytes] = []  # data lines of the event being built
        self._data_len = 0
        self._event: bytes | None = None  # the `event:` field of the event being built
        self._pending_cr = False  # last chunk ended in CR: a leading LF now is its CRLF
        self._started = False
        self.events = 0  # dispatched events
        self.comments = 0  # comment lines (":" ...), keep-alives included
        self.lines = 0  # terminated lines of every kind, blank ones too
        self.last_event_id: bytes | None = None
        self.incomplete_event_discarded = False

    def feed(self, chunk: bytes, t_ns: int) -> None:
        if not chunk:
            return
        if not self._started:
            self._started = True
            if chunk.startswith(_BOM):  # the spec strips one leading BOM
                chunk = chunk[3:]
        if self._pending_cr:
            self._pending_cr = False
            if chunk[:1] == b"\n":
                chunk = chunk[1:]
        if b"\r" in chunk:
            # CRLF and lone CR both end a line. A CR at the very end may be the first
            # half of a CRLF whose LF arrives in the next read: remember it.
            self._pending_cr = chunk[-1:] == b"\r"
            chunk = chunk.replace(b"\r\n", b"\n").replace(b"\r", b"\n")
        if b"\n" not in chunk:  # the line goes on: keep the read, copy nothing
            self._parts.append(chunk)
            self._parts_len += len(chunk)
            self._check_unterminated()
            return
        lines = chunk.split(b"\n")
        if self._parts:
            lines[0] = b"".join([*self._parts, lines[0]])
        rest = lines.pop()
        self._parts, self._parts_len = ([rest], len(rest)) if rest else ([], 0)
        self._check_unterminated()
        self.lines += len(lines)
        if self.lines > self._max_lines:
            raise TooManyLines(
                f"more than {self._max_lines} SSE lines in one response (limit max_lines)"
            )
        data = self._data
        for line in lines:
            if not line:
                # Blank line: dispatch. An event without data lines dispatches nothing.
                if data:
                    payload = data[0] if len(data) == 1 else b"\n".join(data)
                    event = self._event
                    data.clear()
                    self._data_len = 0
                    self._event = None
                    self.events += 1
                    self._on_event(event, payload, t_ns)
                else:
                    self._event = None
                continue
            if line.startswith(b"data:"):
                value = line[6:] if line[5:6] == b" " else line[5:]
                data.append(value)
                self._data_len += len(value) + LINE_OVERHEAD_BYTES
                if self._data_len > self._max_event_bytes:
                    raise EventTooLarge(f"SSE event larger than {self._max_event_bytes} bytes")
            elif line[0] == 58:  # b":" -> comment / keep-alive
                self.comments += 1
                if self._on_comment is not None:
                    self._on_comment(t_ns)
            else:
                self._field(line, data)
        if self.events + self.comments > self._max_events:
            raise TooManyEvents(
                f"more than {self._max_events} SSE events and comment lines in one response "
                "(limit max_events)"
            )

    def _check_unterminated(self) -> None:
        if self._parts_len > self._max_event_bytes:
            raise EventTooLarge(f"unterminated SSE line longer than {self._max_event_bytes} bytes")

    def _field(self, line: bytes, data: list[bytes]) -> None:
        name, colon, value = line.partition(b":")
        if colon and value[:1] == b" ":
            value = value[1:]
        if name == b"event":
            self._event = value or None
        elif name == b"data":  # "data" with no colon: an empty data line
            data.append(value)
            self._data_len += len(value) + LINE_OVERHEAD_BYTES
            if self._data_len > self._max_event_bytes:
                raise EventTooLarge(f"SSE event larger than {self._max_event_bytes} bytes")
        elif name == b"id" and b"\x00" not in value:  # an id with NUL is ignored
            self.last_event_id = value
        # "retry" and unknown fields are ignored, as the spec says.

    def close(self) -> None:
        """End of stream. An event not terminated by a blank line is discarded."""
        if self._parts or self._data:
            self.incomplete_event_discarded = True
        self._parts, self._parts_len = [], 0
        self._data.clear()
        self._event = None
