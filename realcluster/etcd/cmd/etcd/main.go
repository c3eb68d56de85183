// Command etcd runs an etcd server: the published server module's entry point,
// with the same command line as the upstream etcd binary.
package main

import (
	"os"

	"go.etcd.io/etcd/server/v3/etcdmain"
)

func main() {
	etcdmain.Main(os.Args)
}
