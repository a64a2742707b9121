"""The end-to-end tier: the live scheduler and the CLI against a real Kubernetes control plane
(etcd + kube-apiserver, and kube-scheduler where compared), built from Go modules by
`tests.e2e.controlplane`. Marked `e2e`; see docs/tests.md."""
