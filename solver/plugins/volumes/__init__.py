"""The volume plugins, one family: VolumeRestrictions (``volume_restrictions/``), NodeVolumeLimits
(``node_volume_limits/``), VolumeBinding (``volume_binding/``) and VolumeZone (``volume_zone/``).

Each is a plugin package of its own, listed in the registry in kube-scheduler's order; they read
one catalog of the snapshot's claims, volumes and classes (``solver/volume_catalog.py``), and
greedy runs the four filters as one cycle, VolumeBinding's (``volume_binding/filter.py``), which
asks the other three's ``rules`` modules. Imports inside the family are its own business; no
plugin outside it imports one of these, nor do they import a plugin outside it.
"""
