"""The cyclic collector around a command's large input (``adapters.gc_control``)."""

from __future__ import annotations

import gc

from adapters import gc_control


def test_a_pause_in_a_command_that_keeps_its_input_hides_what_it_made() -> None:
    """After ``keep_for_good``, what a paused stage made is frozen on the way out, so the first
    collection after it does not walk it; ``release`` gives everything back."""
    assert gc.isenabled() and not gc_control.kept()
    try:
        gc_control.keep_for_good()
        with gc_control.paused_gc():
            assert not gc.isenabled()
            made = [[i] for i in range(1000)]  # tracked containers, made while paused
        assert gc.isenabled()
        # Frozen: in no generation the collector walks. (The freeze count is no measure: frozen
        # objects that die by reference counting leave it meanwhile.)
        made_ids = {id(x) for x in made}
        assert not any(id(o) in made_ids for o in gc.get_objects())
    finally:
        gc_control.release()
    assert gc.get_freeze_count() == 0 and not gc_control.kept()


def test_a_pause_elsewhere_leaves_the_collector_as_it_was() -> None:
    assert gc.isenabled() and not gc_control.kept()
    before = gc.get_freeze_count()
    with gc_control.paused_gc():
        _ = [[i] for i in range(100)]
    assert gc.isenabled() and gc.get_freeze_count() == before
