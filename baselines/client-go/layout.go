package main

import (
	"encoding/json"
	"flag"
	"fmt"
	"os"
	"runtime"
	"unsafe"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

// layoutEntry is one kind of struct in a generated pod: how many of it the pod holds and the
// bytes of one, as Go lays it out (unsafe.Sizeof: the struct's own body, not what it points to).
type layoutEntry struct {
	Type  string  `json:"type"`
	Count int     `json:"count"`
	Bytes uintptr `json:"bytes"`
}

// podLayout lists the struct bodies of pod: the Pod itself and every element of its lists of
// structs. The Rust example `pod_layout` computes the same list for the Rust pod and compares.
func podLayout(pod *corev1.Pod) []layoutEntry {
	var env, ports, mounts int
	for i := range pod.Spec.Containers {
		c := &pod.Spec.Containers[i]
		env += len(c.Env)
		ports += len(c.Ports)
		mounts += len(c.VolumeMounts)
	}
	return []layoutEntry{
		{"Pod", 1, unsafe.Sizeof(corev1.Pod{})},
		{"OwnerReference", len(pod.OwnerReferences), unsafe.Sizeof(metav1.OwnerReference{})},
		{"Container", len(pod.Spec.Containers), unsafe.Sizeof(corev1.Container{})},
		{"EnvVar", env, unsafe.Sizeof(corev1.EnvVar{})},
		{"ContainerPort", ports, unsafe.Sizeof(corev1.ContainerPort{})},
		{"VolumeMount", mounts, unsafe.Sizeof(corev1.VolumeMount{})},
		{"Toleration", len(pod.Spec.Tolerations), unsafe.Sizeof(corev1.Toleration{})},
		{"Volume", len(pod.Spec.Volumes), unsafe.Sizeof(corev1.Volume{})},
		{"PodCondition", len(pod.Status.Conditions), unsafe.Sizeof(corev1.PodCondition{})},
		{"PodIP", len(pod.Status.PodIPs), unsafe.Sizeof(corev1.PodIP{})},
		{"ContainerStatus", len(pod.Status.ContainerStatuses), unsafe.Sizeof(corev1.ContainerStatus{})},
	}
}

// layoutReport is what `layout` prints: the struct bodies of pod 0 and the live heap a pod of
// the profile takes, measured over many.
type layoutReport struct {
	Structs []layoutEntry `json:"structs"`
	// HeapPerPod is the growth of the live heap (HeapAlloc after a full collection, so each
	// object at its size class) per pod, over `pods` generated pods kept alive.
	HeapPerPod float64 `json:"heap_per_pod"`
	Pods       int     `json:"pods"`
}

// runLayout prints the struct layout of one generated pod and the heap per pod as JSON.
func runLayout(args []string) error {
	fs := flag.NewFlagSet("layout", flag.ContinueOnError)
	profileName := fs.String("profile", "realistic", "realistic or small")
	count := fs.Int("pods", 10000, "pods to generate and keep for the heap measurement")
	if err := fs.Parse(args); err != nil {
		return err
	}
	profile, err := parseProfile(*profileName)
	if err != nil {
		return err
	}
	if *count < 1 {
		return fmt.Errorf("--pods: %d; at least 1", *count)
	}
	sh := shapeForObjects(*count, 50, profile)
	pod := makePod(sh, 0, 1, 0)
	before := liveHeap()
	pods := make([]*corev1.Pod, 0, *count)
	for i := range *count {
		p := makePod(sh, i, uint64(i)+1, i%sh.nodes)
		pods = append(pods, &p)
	}
	after := liveHeap()
	runtime.KeepAlive(pods)
	// The slice of pointers is the harness's, not the pods': left out.
	grown := float64(after) - float64(before) - float64(cap(pods))*float64(unsafe.Sizeof(pods[0]))
	return json.NewEncoder(os.Stdout).Encode(layoutReport{
		Structs:    podLayout(&pod),
		HeapPerPod: grown / float64(*count),
		Pods:       *count,
	})
}
