"""CompositePodGroup (Kubernetes 1.37, v1alpha3): trees of gangs, each level basic or gang."""
