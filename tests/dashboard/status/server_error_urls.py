"""The site's URLs plus one page that fails, as a view that raises on some data would; and
how a test forgets the server errors counted before it."""

from django.urls import path

from dashboard.urls import urlpatterns as site


def broken_page(request):
    raise TypeError("'<' not supported between instances of 'datetime.date' and 'int'")


urlpatterns = [path("broken/", broken_page), *site]


def forget_server_errors(client) -> None:
    """Clear dashboard/server_errors.py's counts (another test's deliberate 500s)."""
    for key in client.scan_iter(match="inferwatch:server-errors:*"):
        client.delete(key)
