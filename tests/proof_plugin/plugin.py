"""CrewRack's ``PLUGIN``: what it implements and what it reads, named once."""

from __future__ import annotations

from solver.plugin_api import Plugin, Reads

from . import encode, rule

PLUGIN = Plugin(
    rule.NAME,
    cycle=rule.cycle,
    prune=rule.prune,
    encode=(encode.encode,),
    checks=(rule.check,),
    couples=rule.couples,
    repack_keep=rule.repack_keep,
    prebind=rule.prebind,
    state=rule.CrewBook.make,
    reads=Reads(signature=rule.crew_of, node_label_keys=rule.node_label_keys, topology_keys=rule.node_label_keys,
                coupling=rule.coupling),
)
