"""Reading input files, one job a module; ``adapters.snapshot_io`` puts them together.

* ``documents``: text in (a path, ``-``, an open file; bounded), JSON or YAML documents out, Helm
  templates and lone surrogates named, Lists flattened into their objects;
* ``yaml_events``: the YAML event assembler (no recursion, a depth limit, an alias budget);
* ``kinds``: the kinds read, their API groups and how an error names one object;
* ``validation``: one object validated into its model, pods sharing one parsed spec;
* ``errors``: a pydantic ValidationError as one ``InputError`` naming the object and field;
* ``config_file``, ``plan_file``: the scheduler config and a plan;
* ``groups``: Kubernetes' own groups (1.36, 1.37) from plain objects, for a dump or a server.
"""

from __future__ import annotations
