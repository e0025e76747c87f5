"""The bus writes plain JSON publishes' frames itself: they must be pamqp's, byte for byte."""

from __future__ import annotations

import pytest
from aiormq.abc import ChannelFrame
from pamqp import commands as spec
from pamqp import frame
from pamqp.body import ContentBody
from pamqp.header import ContentHeader

from contract.publishing import Publication, json_properties


def _pamqp(p: Publication, channel: int, max_content: int) -> bytes:
    body = [ContentBody(p.body[i : i + max_content]) for i in range(0, len(p.body), max_content)]
    frames = [
        spec.Basic.Publish(exchange=p.exchange, routing_key=p.routing_key, mandatory=p.mandatory),
        ContentHeader(properties=json_properties(p.message_id), body_size=len(p.body)),
        *body,
    ]
    return ChannelFrame.marshall(channel, frames).payload


@pytest.mark.parametrize(
    ("body", "mandatory", "max_content"),
    [
        (b'{"a":1}', True, 131_064),
        (b"{}" * 700, False, 131_064),
        (b'{"x":"' + b"y" * 1000 + b'"}', True, 100),  # split over several body frames
        (b"", True, 131_064),  # no body frame at all
    ],
)
def test_plain_frames_are_what_pamqp_encodes(
    body: bytes, mandatory: bool, max_content: int
) -> None:
    p = Publication("croupier.settlements", "EUR.player-7", body, "3f1c-id", mandatory=mandatory)
    assert p.frames(3, max_content) == _pamqp(p, 3, max_content)


def test_plain_frames_read_back_as_the_message() -> None:
    p = Publication("croupier.settlements", "EUR.é-7", b'{"a":1}', "id-1", mandatory=True)
    data = p.frames(9, 131_064)
    read: list[object] = []
    while data:
        consumed, channel, value = frame.unmarshal(data)
        assert channel == 9
        read.append(value)
        data = data[consumed:]
    publish, header, content = read
    assert isinstance(publish, spec.Basic.Publish) and publish.mandatory
    assert publish.routing_key == "EUR.é-7"
    assert isinstance(header, ContentHeader) and header.body_size == 7
    assert header.properties.message_id == "id-1"
    assert header.properties.delivery_mode == 2
    assert header.properties.content_type == "application/json"
    assert isinstance(content, ContentBody) and content.value == b'{"a":1}'


def test_frames_with_headers_go_through_pamqp() -> None:
    headers = {"x-croupier-reason": "bad", "x-croupier-code": "contract"}
    p = Publication("croupier.dead-letter", "t.bet.placed", b"{", "id-2", headers=headers)
    frames = [
        spec.Basic.Publish(exchange=p.exchange, routing_key=p.routing_key),
        ContentHeader(properties=json_properties("id-2", headers), body_size=1),
        ContentBody(b"{"),
    ]
    assert p.frames(1, 131_064) == ChannelFrame.marshall(1, frames).payload


def test_a_short_string_longer_than_255_bytes_is_refused() -> None:
    with pytest.raises(ValueError, match="255"):
        Publication("x", "k" * 256, b"{}", "id").frames(1, 131_064)
