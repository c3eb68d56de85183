package main

import (
	"fmt"
	"strconv"
	"strings"
	"time"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
)

// This file is the Go port of crates/snapinformer-sim/src/pods.rs: the same pods, field for field,
// from the same inputs. The Rust test crates/snapinformer-sim/tests/client_go_workload.rs checks
// that both generators give equal JSON for both profiles, for initial pods and update plans.
//
// Every string and every optional scalar of a generated pod is its own heap allocation (literals
// are cloned, pointers are taken to fresh copies), as they are in a pod a client decodes off the
// wire, so that the heap measured for the objects is the heap a real informer's objects take.

const (
	// ownerIndex is the name of the owner-UID index (pods.rs OWNER_INDEX).
	ownerIndex = "owner"
	// nodeIndex is the name of the node-name index (pods.rs NODE_INDEX).
	nodeIndex = "node"
	// namespace is the namespace of every scenario pod (pods.rs NAMESPACE).
	namespace = "default"
)

// podProfile says how much of a pod the generator fills in (pods.rs PodProfile).
type podProfile int

const (
	// profileRealistic is a StatefulSet pod with two containers and a full status.
	profileRealistic podProfile = iota
	// profileSmall is metadata, node name and phase only.
	profileSmall
)

// parseProfile reads a profile by the name clap gives it on the Rust side.
func parseProfile(s string) (podProfile, error) {
	switch s {
	case "realistic":
		return profileRealistic, nil
	case "small":
		return profileSmall, nil
	}
	return 0, fmt.Errorf("unknown pod profile %q (expected realistic or small)", s)
}

// String gives the profile's name as the Rust side spells it.
func (p podProfile) String() string {
	if p == profileSmall {
		return "small"
	}
	return "realistic"
}

// shape is the population: owners (StatefulSets) of perOwner pods over nodes (pods.rs Shape).
type shape struct {
	owners   int
	perOwner int
	nodes    int
	profile  podProfile
}

// shapeForObjects gives objects pods in sets of 1000 (fewer if objects is small) over nodes.
func shapeForObjects(objects, nodes int, profile podProfile) shape {
	perOwner := min(max(objects, 1), 1000)
	return shape{
		owners:   (objects + perOwner - 1) / perOwner,
		perOwner: perOwner,
		nodes:    max(nodes, 1),
		profile:  profile,
	}
}

// total is the number of pods.
func (s shape) total() int { return s.owners * s.perOwner }

// ownerUID is the UID of owner i (deterministic, UUID-shaped).
func ownerUID(i int) string {
	return fmt.Sprintf("5e1f0c2a-%04x-4b7e-9d3c-%012x", i%0xffff, i)
}

// nodeName is the name of node i.
func nodeName(i int) string {
	return fmt.Sprintf("ip-10-0-%d-%d.ec2.internal", i/250, i%250)
}

// epoch is the generator's time origin (1,764,000,000 s after the Unix epoch).
const epoch = 1_764_000_000

// ts is the time secs seconds after the generator's epoch.
func ts(secs int64) metav1.Time {
	return metav1.NewTime(time.Unix(epoch+secs, 0).UTC())
}

// own returns a heap copy of s (see the file comment).
func own(s string) string { return strings.Clone(s) }

// ptr returns a pointer to a fresh copy of v.
func ptr[T any](v T) *T { return &v }

// makePod is pod number i of s at resource version rv on node node.
func makePod(s shape, i int, rv uint64, node int) corev1.Pod {
	if s.profile == profileSmall {
		return smallPod(s, i, rv, node)
	}
	return realisticPod(s, i, rv, node)
}

func podUID(i int) string {
	return fmt.Sprintf("%08x-aaaa-4bbb-8ccc-%012x", i, i*31)
}

func ownerReference(set string, owner int) metav1.OwnerReference {
	return metav1.OwnerReference{
		APIVersion:         own("apps/v1"),
		Kind:               own("StatefulSet"),
		Name:               set,
		UID:                types.UID(ownerUID(owner)),
		Controller:         ptr(true),
		BlockOwnerDeletion: ptr(true),
	}
}

func smallPod(s shape, i int, rv uint64, node int) corev1.Pod {
	owner := i / s.perOwner
	set := fmt.Sprintf("web-%d", owner)
	name := fmt.Sprintf("%s-%d", set, i%s.perOwner)
	return corev1.Pod{
		ObjectMeta: metav1.ObjectMeta{
			Labels: map[string]string{
				own("app"): set,
				own("statefulset.kubernetes.io/pod-name"): own(name),
			},
			Name:            name,
			Namespace:       own(namespace),
			UID:             types.UID(podUID(i)),
			ResourceVersion: strconv.FormatUint(rv, 10),
			OwnerReferences: []metav1.OwnerReference{ownerReference(own(set), owner)},
		},
		Spec: corev1.PodSpec{
			// Rust writes the required `containers` as []; Go decodes that to an empty slice.
			Containers: []corev1.Container{},
			NodeName:   nodeName(node),
		},
		Status: corev1.PodStatus{Phase: corev1.PodPhase(own("Running"))},
	}
}

func realisticPod(s shape, i int, rv uint64, node int) corev1.Pod {
	owner := i / s.perOwner
	ordinal := i % s.perOwner
	set := fmt.Sprintf("web-%d", owner)
	name := fmt.Sprintf("%s-%d", set, ordinal)
	labels := map[string]string{
		own("app"):                                own(set),
		own("controller-revision-hash"):           set + "-7c9d5f8b6d",
		own("statefulset.kubernetes.io/pod-name"): own(name),
		own("apps.kubernetes.io/pod-index"):       strconv.Itoa(ordinal),
		own("tier"):                               own("backend"),
	}
	annotations := map[string]string{
		own("kubectl.kubernetes.io/default-container"): own("app"),
		own("prometheus.io/scrape"):                    own("true"),
		own("prometheus.io/port"):                      own("9102"),
	}
	env := func() []corev1.EnvVar {
		out := make([]corev1.EnvVar, 6)
		for e := range out {
			out[e] = corev1.EnvVar{
				Name:  fmt.Sprintf("SETTING_%d", e),
				Value: fmt.Sprintf("value-%d-%s", e, set),
			}
		}
		return out
	}
	container := func(cname, image string, port int32) corev1.Container {
		return corev1.Container{
			Name:  own(cname),
			Image: own(image),
			Ports: []corev1.ContainerPort{{
				ContainerPort: port,
				Name:          own("http"),
				Protocol:      corev1.Protocol(own("TCP")),
			}},
			Env: env(),
			Resources: corev1.ResourceRequirements{
				Requests: corev1.ResourceList{
					corev1.ResourceName(own("cpu")):    resource.MustParse("100m"),
					corev1.ResourceName(own("memory")): resource.MustParse("128Mi"),
				},
				Limits: corev1.ResourceList{
					corev1.ResourceName(own("memory")): resource.MustParse("256Mi"),
				},
			},
			VolumeMounts: []corev1.VolumeMount{
				{Name: own("data"), MountPath: own("/var/lib/data")},
				{
					Name:      own("kube-api-access"),
					MountPath: own("/var/run/secrets/kubernetes.io/serviceaccount"),
					ReadOnly:  true,
				},
			},
			TerminationMessagePath:   own("/dev/termination-log"),
			TerminationMessagePolicy: corev1.TerminationMessagePolicy(own("File")),
			ImagePullPolicy:          corev1.PullPolicy(own("IfNotPresent")),
		}
	}
	nodeStr := nodeName(node)
	cond := func(t string, secs int64) corev1.PodCondition {
		return corev1.PodCondition{
			Type:               corev1.PodConditionType(own(t)),
			Status:             corev1.ConditionStatus(own("True")),
			LastTransitionTime: ts(secs),
		}
	}
	statusOf := func(cname, image string) corev1.ContainerStatus {
		return corev1.ContainerStatus{
			Name:         own(cname),
			Image:        own(image),
			ImageID:      fmt.Sprintf("docker.io/library/%s@sha256:%064x", image, i),
			ContainerID:  fmt.Sprintf("containerd://%064x", i*7+3),
			Ready:        true,
			RestartCount: 0,
			Started:      ptr(true),
			State: corev1.ContainerState{
				Running: &corev1.ContainerStateRunning{StartedAt: ts(30)},
			},
		}
	}
	ip := fmt.Sprintf("10.1.%d.%d", (i/250)%250, i%250)
	toleration := func(key string) corev1.Toleration {
		return corev1.Toleration{
			Key:               own(key),
			Operator:          corev1.TolerationOperator(own("Exists")),
			Effect:            corev1.TaintEffect(own("NoExecute")),
			TolerationSeconds: ptr(int64(300)),
		}
	}
	return corev1.Pod{
		ObjectMeta: metav1.ObjectMeta{
			Name:              name,
			Namespace:         own(namespace),
			UID:               types.UID(podUID(i)),
			ResourceVersion:   strconv.FormatUint(rv, 10),
			CreationTimestamp: ts(0),
			Labels:            labels,
			Annotations:       annotations,
			OwnerReferences:   []metav1.OwnerReference{ownerReference(set, owner)},
		},
		Spec: corev1.PodSpec{
			Containers: []corev1.Container{
				container("app", "registry.example.com/web:1.27.3", 8080),
				container("sidecar", "registry.example.com/proxy:2.4.1", 15001),
			},
			NodeName:                      own(nodeStr),
			RestartPolicy:                 corev1.RestartPolicy(own("Always")),
			DNSPolicy:                     corev1.DNSPolicy(own("ClusterFirst")),
			ServiceAccountName:            own("default"),
			SchedulerName:                 own("default-scheduler"),
			TerminationGracePeriodSeconds: ptr(int64(30)),
			Priority:                      ptr(int32(0)),
			EnableServiceLinks:            ptr(true),
			PreemptionPolicy:              ptr(corev1.PreemptionPolicy(own("PreemptLowerPriority"))),
			Tolerations: []corev1.Toleration{
				toleration("node.kubernetes.io/not-ready"),
				toleration("node.kubernetes.io/unreachable"),
			},
			Volumes: []corev1.Volume{{Name: own("data")}, {Name: own("kube-api-access")}},
		},
		Status: corev1.PodStatus{
			Phase: corev1.PodPhase(own("Running")),
			Conditions: []corev1.PodCondition{
				cond("PodReadyToStartContainers", 20),
				cond("Initialized", 10),
				cond("Ready", 40),
				cond("ContainersReady", 40),
				cond("PodScheduled", 1),
			},
			HostIP:    fmt.Sprintf("10.0.%d.%d", len(nodeStr), i%250),
			PodIP:     ip,
			PodIPs:    []corev1.PodIP{{IP: own(ip)}},
			StartTime: ptr(ts(5)),
			QOSClass:  corev1.PodQOSClass(own("Burstable")),
			ContainerStatuses: []corev1.ContainerStatus{
				statusOf("app", "web:1.27.3"),
				statusOf("sidecar", "proxy:2.4.1"),
			},
		},
	}
}

// rng is the deterministic xorshift generator of pods.rs (the figures must not depend on a seed
// source).
type rng struct{ state uint64 }

// newRng returns a generator from a seed (0 counts as 1, as in Rust).
func newRng(seed uint64) *rng { return &rng{state: max(seed, 1)} }

// next returns the next value.
func (r *rng) next() uint64 {
	r.state ^= r.state << 13
	r.state ^= r.state >> 7
	r.state ^= r.state << 17
	return r.state
}

// below returns a value uniform below n.
func (r *rng) below(n int) int { return int(r.next() % uint64(n)) }

// planEntry is one update of a plan: the pod index and its node afterwards.
type planEntry struct{ pod, node int }

// updatePlan chooses count updates of random pods (about 5% move the pod to another node), exactly
// as pods.rs `updates` does.
func updatePlan(s shape, count int, seed uint64) []planEntry {
	r := newRng(seed)
	nodeOf := make([]int, s.total())
	for i := range nodeOf {
		nodeOf[i] = i % s.nodes
	}
	plan := make([]planEntry, count)
	for u := range plan {
		i := r.below(s.total())
		if r.below(100) < 5 {
			nodeOf[i] = r.below(s.nodes)
		}
		plan[u] = planEntry{pod: i, node: nodeOf[i]}
	}
	return plan
}

// generate builds count pods with make(i) on every core (generation is not measured). Each pod
// is an allocation of its own, as each object decoded from a watch is, and as client-go's
// reflector makes each item of a list (meta.ExtractListWithAlloc copies every item out of the
// list's array): a store holding one pod of a pool then keeps only that pod alive, not the whole
// pool, as a Rust store holding one Arc<Pod> does.
func generate(count int, mk func(i int) corev1.Pod) []*corev1.Pod {
	out := make([]*corev1.Pod, count)
	parallel(count, func(i int) {
		p := mk(i)
		out[i] = &p
	})
	return out
}

// initialPods is the initial population: pod i on node i % nodes, resource versions 1..=total.
func initialPods(s shape) []*corev1.Pod {
	return generate(s.total(), func(i int) corev1.Pod {
		return makePod(s, i, uint64(i)+1, i%s.nodes)
	})
}

// updates is count updates of random pods with increasing resource versions from firstRV.
func updates(s shape, count int, firstRV, seed uint64) []*corev1.Pod {
	plan := updatePlan(s, count, seed)
	return generate(count, func(u int) corev1.Pod {
		return makePod(s, plan[u].pod, firstRV+uint64(u), plan[u].node)
	})
}

// workloadDigest is FNV-1a (64 bit) over one line "phase name resourceVersion nodeName\n" per pod
// applied, in order: the same function as pods.rs `WorkloadDigest`, so that the parent can check
// that every row of a run got the same workload.
type workloadDigest struct{ h uint64 }

const (
	fnvOffset = 0xcbf29ce484222325
	fnvPrime  = 0x100000001b3
)

// newWorkloadDigest starts an empty digest.
func newWorkloadDigest() *workloadDigest { return &workloadDigest{h: fnvOffset} }

func (d *workloadDigest) write(s string) {
	for i := 0; i < len(s); i++ {
		d.h ^= uint64(s[i])
		d.h *= fnvPrime
	}
}

// add adds the pods of one phase.
func (d *workloadDigest) add(phase string, pods []*corev1.Pod) {
	for _, p := range pods {
		d.write(phase)
		d.write(" ")
		d.write(p.Namespace)
		d.write("/")
		d.write(p.Name)
		d.write(" ")
		d.write(p.ResourceVersion)
		d.write(" ")
		d.write(p.Spec.NodeName)
		d.write("\n")
	}
}

// hex is the digest as 16 hex digits.
func (d *workloadDigest) hex() string { return fmt.Sprintf("%016x", d.h) }
