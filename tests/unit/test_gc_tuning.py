"""The controller's cycle-collector setting: raised while it runs, restored after, never lowered."""

from __future__ import annotations

import gc

import pytest

from presage_scaler.controller.gc_tuning import YOUNG_THRESHOLD, collecting_less_often


@pytest.fixture
def thresholds():
    saved = gc.get_threshold()
    yield
    gc.set_threshold(*saved)


def test_the_young_threshold_is_raised_while_running_and_restored_after(thresholds):
    gc.set_threshold(700, 10, 10)
    with collecting_less_often():
        assert gc.get_threshold() == (YOUNG_THRESHOLD, 10, 10)
    assert gc.get_threshold() == (700, 10, 10)


def test_a_higher_threshold_already_set_is_kept(thresholds):
    gc.set_threshold(YOUNG_THRESHOLD * 2, 5, 5)
    with collecting_less_often():
        assert gc.get_threshold() == (YOUNG_THRESHOLD * 2, 5, 5)
    assert gc.get_threshold() == (YOUNG_THRESHOLD * 2, 5, 5)


def test_the_setting_is_restored_when_the_block_fails(thresholds):
    gc.set_threshold(700, 10, 10)
    with pytest.raises(RuntimeError), collecting_less_often():
        raise RuntimeError("boom")
    assert gc.get_threshold() == (700, 10, 10)
