"""PodTopologySpread: DoNotSchedule constraints (filter and CP-SAT encoding), ScheduleAnyway
and the system defaults (score), and the window guard greedy uses so a window's own pods
keep the skew the final state is checked against."""
