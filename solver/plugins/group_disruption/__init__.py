"""``disruptionMode: all``: a PodGroup's running members are evicted together or not at all."""
