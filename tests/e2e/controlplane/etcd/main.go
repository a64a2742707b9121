// Command etcd is etcd's server, built from the go.etcd.io/etcd/server/v3 module: etcd's own
// main is a one-liner over etcdmain.Main, which this is too.
package main

import (
	"os"

	"go.etcd.io/etcd/server/v3/etcdmain"
)

func main() { etcdmain.Main(os.Args) }
