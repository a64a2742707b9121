"""TaintToleration: NoSchedule/NoExecute taints tolerated (filter), PreferNoSchedule counted
(score)."""
