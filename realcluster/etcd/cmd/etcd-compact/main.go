// Command etcd-compact compacts an etcd key space at its current revision and
// prints that revision on stdout. After it returns, a watch or read at any
// earlier revision fails with "required revision has been compacted", which
// kube-apiserver turns into 410 Gone (Expired) for its clients.
package main

import (
	"context"
	"flag"
	"fmt"
	"os"
	"strings"
	"time"

	clientv3 "go.etcd.io/etcd/client/v3"
)

func main() {
	endpoints := flag.String("endpoints", "http://127.0.0.1:2379", "comma-separated etcd client URLs")
	timeout := flag.Duration("timeout", 10*time.Second, "deadline for connecting and compacting")
	flag.Parse()
	if flag.NArg() != 0 {
		fmt.Fprintf(os.Stderr, "etcd-compact: unexpected arguments %q\n", flag.Args())
		os.Exit(2)
	}
	rev, err := compact(strings.Split(*endpoints, ","), *timeout)
	if err != nil {
		fmt.Fprintf(os.Stderr, "etcd-compact: %v\n", err)
		os.Exit(1)
	}
	fmt.Println(rev)
}

// compact reads the current revision from the response header of a cheap
// read and compacts at it, physically (waiting until the old revisions are
// removed from the backend).
func compact(endpoints []string, timeout time.Duration) (int64, error) {
	ctx, cancel := context.WithTimeout(context.Background(), timeout)
	defer cancel()
	client, err := clientv3.New(clientv3.Config{
		Endpoints:   endpoints,
		DialTimeout: timeout,
		Context:     ctx,
	})
	if err != nil {
		return 0, fmt.Errorf("connecting to %v: %w", endpoints, err)
	}
	defer client.Close()
	resp, err := client.Get(ctx, "\x00", clientv3.WithCountOnly())
	if err != nil {
		return 0, fmt.Errorf("reading the current revision from %v: %w", endpoints, err)
	}
	rev := resp.Header.Revision
	if _, err := client.Compact(ctx, rev, clientv3.WithCompactPhysical()); err != nil {
		return 0, fmt.Errorf("compacting %v at revision %d: %w", endpoints, rev, err)
	}
	return rev, nil
}
