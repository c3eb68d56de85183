// Command reconnect is the client-go side of snapinformer's reconnection measurement
// (crates/snapinformer-kube/examples/reconnect.rs): a real client-go v0.37.2 shared pod
// informer against the API server named by $KUBECONFIG. It prints "synced" once its cache has
// synced, then "seen <name> <unix nanos>" for every pod added, and runs until it is killed.
package main

import (
	"fmt"
	"os"
	"time"

	v1 "k8s.io/api/core/v1"
	"k8s.io/client-go/informers"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/tools/cache"
	"k8s.io/client-go/tools/clientcmd"
)

func main() {
	config, err := clientcmd.BuildConfigFromFlags("", os.Getenv("KUBECONFIG"))
	if err != nil {
		fmt.Fprintln(os.Stderr, "kubeconfig:", err)
		os.Exit(1)
	}
	// The test API server speaks JSON only.
	config.ContentType = "application/json"
	config.AcceptContentTypes = "application/json"
	clientset, err := kubernetes.NewForConfig(config)
	if err != nil {
		fmt.Fprintln(os.Stderr, "client:", err)
		os.Exit(1)
	}
	factory := informers.NewSharedInformerFactory(clientset, 0)
	podInformer := factory.Core().V1().Pods().Informer()
	_, err = podInformer.AddEventHandler(cache.ResourceEventHandlerFuncs{
		AddFunc: func(obj any) {
			if pod, ok := obj.(*v1.Pod); ok {
				fmt.Printf("seen %s %d\n", pod.Name, time.Now().UnixNano())
			}
		},
	})
	if err != nil {
		fmt.Fprintln(os.Stderr, "handler:", err)
		os.Exit(1)
	}
	stop := make(chan struct{})
	factory.Start(stop)
	if !cache.WaitForCacheSync(stop, podInformer.HasSynced) {
		fmt.Fprintln(os.Stderr, "the informer did not sync")
		os.Exit(1)
	}
	fmt.Println("synced")
	select {}
}
