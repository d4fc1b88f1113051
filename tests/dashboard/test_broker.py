"""A worker survives Redis going away while it holds unacknowledged messages."""

import pytest
import redis
from kombu import Connection, Exchange, Queue
from kombu.common import ignore_errors

from dashboard import broker


@pytest.fixture
def held_message(settings):
    """A channel holding one unacknowledged message, as a worker running a late-ack task."""
    broker.install()
    conn = Connection(settings.CELERY_BROKER_URL)
    channel = conn.default_channel
    queue = Queue("inferwatch-test-broker", Exchange("inferwatch-test-broker"), "k")
    queue(channel).declare()
    producer = conn.Producer(serializer="json")
    producer.publish({"x": 1}, exchange=queue.exchange, routing_key="k", declare=[queue])
    message = queue(channel).get(no_ack=False)
    assert message is not None
    yield conn, channel
    channel.do_restore = False  # the test queue is deleted: nothing to put back at exit
    queue(Connection(settings.CELERY_BROKER_URL).default_channel).delete()


def test_closing_a_channel_whose_connection_is_gone_is_a_connection_error_not_a_crash(
    held_message,
):
    conn, channel = held_message
    conn._do_close_transport()  # the state kombu leaves a dropped connection in

    with pytest.raises(redis.exceptions.ConnectionError):
        channel._connparams()
    # What Celery does on a lost connection: close, ignoring connection errors. Before the
    # guard this raised AttributeError ('NoneType' ... 'hostname') and the worker exited.
    ignore_errors(conn, channel.close)


def test_a_live_channel_still_gets_its_connection_parameters(held_message):
    _, channel = held_message
    assert channel._connparams()["host"]
