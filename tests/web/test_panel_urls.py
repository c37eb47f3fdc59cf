"""Folds and comparisons have addresses: loaded directly, each is the whole session
page with that view open; asked by htmx, only the panel."""

from __future__ import annotations

from collections.abc import Callable

from django.test import Client

from contextview.sessions.models import Session


def _htmx(target: str) -> dict[str, str]:
    return {"HTTP_HX_REQUEST": "true", "HTTP_HX_TARGET": target}


def test_it_loads_a_fold_address_as_the_session_page_with_the_fold_open(
    login: Callable[..., Client], order_session: Session
) -> None:
    client = login("viewer")
    url = f"/sessions/{order_session.pk}/steps/0/fold/?result=sum_1"
    page = client.get(url).content.decode()
    assert 'id="occupancy-chart"' in page and 'id="step-row-2"' in page
    assert 'id="step-view" data-step="0"' in page
    panel = page.split('id="fold-panel"')[1]
    assert "replaced 1 original" in panel and "upstream timed out" in panel
    # Asked for the step panel (Back to it), the step with the fold open; asked for
    # the fold panel (a click in the open step), the fold alone.
    step_panel = client.get(url, **_htmx("step-panel")).content.decode()
    assert 'id="step-view"' in step_panel and "upstream timed out" in step_panel
    assert "occupancy-chart" not in step_panel
    fold_panel = client.get(url, **_htmx("fold-panel")).content.decode()
    assert "upstream timed out" in fold_panel and 'id="step-view"' not in fold_panel


def test_it_loads_a_compare_address_as_the_session_page_with_the_comparison_open(
    login: Callable[..., Client], order_session: Session
) -> None:
    client = login("viewer")
    url = f"/sessions/{order_session.pk}/compare/?from=0&to=2"
    page = client.get(url).content.decode()
    assert 'id="occupancy-chart"' in page and 'id="step-row-1"' in page
    assert 'id="compare-view" data-from="0" data-to="2"' in page
    assert "Tokens per partition" in page and "at checkout since Monday" in page
    panel = client.get(url, **_htmx("step-panel")).content.decode()
    assert 'id="compare-view"' in panel and "occupancy-chart" not in panel
    missing = client.get(f"/sessions/{order_session.pk}/compare/?from=0&to=7").content.decode()
    assert "This session has no step 7." in missing and 'id="occupancy-chart"' in missing
    # Backwards (it was shown with no word): said, with the way forwards.
    back = client.get(f"/sessions/{order_session.pk}/compare/?from=2&to=0").content.decode()
    assert "Step 2 comes after step 0: this reads the session backwards" in back
    assert f'href="/sessions/{order_session.pk}/compare/?from=0&amp;to=2"' in back
    assert "reads the session backwards" not in page
