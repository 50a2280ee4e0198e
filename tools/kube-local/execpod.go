package main

// The exec kubelet: pods whose every image is allow-listed run as host
// processes (see execpolicy.go for the decisions, execcontainer.go for the
// mount namespace, execnet.go for the network namespace, kubeletserver.go
// for logs and kubeletportforward.go for port forwarding).

import (
	"context"
	"errors"
	"fmt"
	"net/url"
	"os"
	"os/exec"
	"path/filepath"
	"sync"
	"syscall"
	"time"

	authenticationv1 "k8s.io/api/authentication/v1"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/rest"
	"k8s.io/client-go/util/retry"
	v1qos "k8s.io/kubernetes/pkg/apis/core/v1/helper/qos"
)

// serviceAccountMount is where a pod finds its ServiceAccount's token, the
// cluster's CA and its namespace.
const serviceAccountMount = "/var/run/secrets/kubernetes.io/serviceaccount"

// tokenLifetime is the ServiceAccount token's lifetime; it is renewed at
// two thirds of it, as the kubelet does at 80%.
const tokenLifetime = time.Hour

type execKubelet struct {
	client  kubernetes.Interface
	images  execImages
	podsDir string
	caData  []byte
	apiHost string
	apiPort string

	mu   sync.Mutex
	pods map[types.UID]*execPod
}

// execPod is one pod that really runs.
type execPod struct {
	k        *execKubelet
	pod      *corev1.Pod
	programs map[string]string
	dir      string
	ctx      context.Context
	cancel   context.CancelFunc
	reports  chan struct{}
	loops    sync.WaitGroup
	stopOnce sync.Once
	stopped  chan struct{}

	mu    sync.Mutex
	runs  []containerRun
	procs map[string]*os.Process
	// net is the pod's network namespace, once it exists (never with
	// hostNetwork). Under mu: a port-forward reads it from another
	// goroutine.
	net *podNetwork
}

func newExecKubelet(client kubernetes.Interface, config *rest.Config, images execImages, podsDir string) (*execKubelet, error) {
	if podsDir == "" {
		return nil, errors.New("--exec-image needs --pods-dir")
	}
	server, err := url.Parse(config.Host)
	if err != nil {
		return nil, fmt.Errorf("API server address %q: %w", config.Host, err)
	}
	caData := config.CAData
	if len(caData) == 0 && config.CAFile != "" {
		if caData, err = os.ReadFile(config.CAFile); err != nil {
			return nil, err
		}
	}
	return &execKubelet{
		client: client, images: images, podsDir: podsDir, caData: caData,
		apiHost: server.Hostname(), apiPort: server.Port(), pods: map[types.UID]*execPod{},
	}, nil
}

// programsFor is execImages.programsFor; nothing runs for real without
// an exec kubelet.
func (k *execKubelet) programsFor(pod *corev1.Pod) (map[string]string, bool) {
	if k == nil {
		return nil, false
	}
	return k.images.programsFor(pod)
}

// ensure starts pod's containers unless they were started already.
func (k *execKubelet) ensure(pod *corev1.Pod, programs map[string]string) {
	k.mu.Lock()
	defer k.mu.Unlock()
	if _, ok := k.pods[pod.UID]; ok {
		return
	}
	ctx, cancel := context.WithCancel(context.Background())
	p := &execPod{
		k: k, pod: pod.DeepCopy(), programs: programs,
		dir: filepath.Join(k.podsDir, string(pod.UID)), ctx: ctx, cancel: cancel,
		reports: make(chan struct{}, 1), stopped: make(chan struct{}), procs: map[string]*os.Process{},
	}
	for _, container := range pod.Spec.Containers {
		p.runs = append(p.runs, containerRun{name: container.Name, image: container.Image})
	}
	k.pods[pod.UID] = p
	go p.report()
	go p.start()
}

// terminate stops pod's containers (SIGTERM, then SIGKILL after the
// grace period) and reports whether it did: false when this kubelet does
// not run pod. It returns once they have exited; only the first of
// concurrent callers gets first true, to finish the deletion.
func (k *execKubelet) terminate(pod *corev1.Pod) (running, first bool) {
	k.mu.Lock()
	p, ok := k.pods[pod.UID]
	k.mu.Unlock()
	if !ok {
		return false, false
	}
	grace := int64(corev1.DefaultTerminationGracePeriodSeconds)
	switch {
	case pod.DeletionGracePeriodSeconds != nil:
		grace = *pod.DeletionGracePeriodSeconds
	case pod.Spec.TerminationGracePeriodSeconds != nil:
		grace = *pod.Spec.TerminationGracePeriodSeconds
	}
	p.stopOnce.Do(func() {
		first = true
		p.stop(time.Duration(grace) * time.Second)
		if network := p.network(); network != nil {
			network.close()
		}
		k.mu.Lock()
		delete(k.pods, pod.UID)
		k.mu.Unlock()
		_ = os.RemoveAll(p.dir)
		close(p.stopped)
	})
	<-p.stopped
	return true, first
}

// podNamed is the pod namespace/name this kubelet runs.
func (k *execKubelet) podNamed(namespace, name string) (*execPod, bool) {
	k.mu.Lock()
	defer k.mu.Unlock()
	for _, p := range k.pods {
		if p.pod.Namespace == namespace && p.pod.Name == name {
			return p, true
		}
	}
	return nil, false
}

// podWithUID is the pod uid this kubelet runs.
func (k *execKubelet) podWithUID(uid types.UID) (*execPod, bool) {
	k.mu.Lock()
	defer k.mu.Unlock()
	p, ok := k.pods[uid]
	return p, ok
}

// network is the pod's network namespace, nil until it exists.
func (p *execPod) network() *podNetwork {
	p.mu.Lock()
	defer p.mu.Unlock()
	return p.net
}

// logPath is the log file of container in pod namespace/name.
func (k *execKubelet) logPath(namespace, name, container string) (string, bool) {
	p, ok := k.podNamed(namespace, name)
	if !ok {
		return "", false
	}
	if _, ok := p.programs[container]; !ok {
		return "", false
	}
	return p.logFile(container), true
}

// done reports whether container of pod namespace/name will write no more
// (it terminated for good, or the pod is gone).
func (k *execKubelet) done(namespace, name, container string) bool {
	k.mu.Lock()
	defer k.mu.Unlock()
	for _, p := range k.pods {
		if p.pod.Namespace == namespace && p.pod.Name == name {
			p.mu.Lock()
			defer p.mu.Unlock()
			for _, run := range p.runs {
				if run.name == container {
					return run.terminated
				}
			}
		}
	}
	return true
}

func (p *execPod) logFile(container string) string {
	return filepath.Join(p.dir, "logs", container+".log")
}

// start prepares the pod's directories and credentials, then runs each
// container in a loop of its own.
func (p *execPod) start() {
	// Prepare the pod's directories.
	for _, dir := range []string{"home", "logs", "serviceaccount", "volumes"} {
		if err := os.MkdirAll(filepath.Join(p.dir, dir), 0o755); err != nil {
			p.waitAll("CreateContainerConfigError", err.Error())
			return
		}
	}
	for _, volume := range p.pod.Spec.Volumes {
		if volume.EmptyDir != nil {
			if err := os.MkdirAll(filepath.Join(p.dir, "volumes", volume.Name), 0o777); err != nil {
				p.waitAll("CreateContainerConfigError", err.Error())
				return
			}
		}
	}
	if !p.pod.Spec.HostNetwork {
		network, err := newPodNetwork(p.k.apiHost, p.k.apiPort)
		if err != nil {
			p.waitAll("CreatePodSandboxError", err.Error())
			return
		}
		p.mu.Lock()
		p.net = network
		p.mu.Unlock()
	}
	// Write the ServiceAccount's credentials, retrying while the
	// ServiceAccount does not exist (yet).
	if p.automountsToken() {
		for {
			err := p.writeCredentials()
			if err == nil {
				break
			}
			p.waitAll("CreateContainerConfigError", err.Error())
			select {
			case <-p.ctx.Done():
				return
			case <-time.After(5 * time.Second):
			}
		}
		go p.renewToken()
	}
	// Run the containers.
	for i := range p.pod.Spec.Containers {
		p.loops.Add(1)
		go p.runContainer(i)
	}
}

func (p *execPod) automountsToken() bool {
	return p.pod.Spec.AutomountServiceAccountToken == nil || *p.pod.Spec.AutomountServiceAccountToken
}

// writeCredentials writes a token bound to the pod (for the API server's
// default audience), the CA and the namespace.
func (p *execPod) writeCredentials() error {
	seconds := int64(tokenLifetime / time.Second)
	request := &authenticationv1.TokenRequest{Spec: authenticationv1.TokenRequestSpec{
		ExpirationSeconds: &seconds,
		BoundObjectRef:    &authenticationv1.BoundObjectReference{Kind: "Pod", APIVersion: "v1", Name: p.pod.Name, UID: p.pod.UID},
	}}
	account := serviceAccountOf(p.pod)
	ctx, cancel := context.WithTimeout(p.ctx, 10*time.Second)
	defer cancel()
	token, err := p.k.client.CoreV1().ServiceAccounts(p.pod.Namespace).CreateToken(ctx, account, request, metav1.CreateOptions{})
	if err != nil {
		return fmt.Errorf("requesting a token for ServiceAccount %s/%s: %w", p.pod.Namespace, account, err)
	}
	dir := filepath.Join(p.dir, "serviceaccount")
	for name, data := range map[string][]byte{
		"token": []byte(token.Status.Token), "ca.crt": p.k.caData, "namespace": []byte(p.pod.Namespace),
	} {
		if err := writeFileAtomic(filepath.Join(dir, name), data, 0o644); err != nil {
			return err
		}
	}
	return nil
}

func (p *execPod) renewToken() {
	for {
		select {
		case <-p.ctx.Done():
			return
		case <-time.After(tokenLifetime * 2 / 3):
		}
		if err := p.writeCredentials(); err != nil {
			fmt.Fprintf(os.Stderr, "exec-kubelet: pod %s/%s: %v\n", p.pod.Namespace, p.pod.Name, err)
		}
	}
}

// waitAll marks every container as not started, for reason.
func (p *execPod) waitAll(reason, message string) {
	p.mu.Lock()
	for i := range p.runs {
		p.runs[i].waitingReason, p.runs[i].message = reason, message
	}
	p.mu.Unlock()
	p.changed()
}

// runContainer runs container i until it terminates for good under the
// pod's restart policy, or the pod stops.
func (p *execPod) runContainer(i int) {
	defer p.loops.Done()
	container := &p.pod.Spec.Containers[i]
	failures := 0
	for {
		started := time.Now()
		process, exited, err := p.startProcess(container)
		if err != nil {
			p.update(i, func(run *containerRun) {
				run.waitingReason, run.message = "RunContainerError", err.Error()
			})
			exited = closedWith(128)
		} else {
			p.update(i, func(run *containerRun) {
				run.running, run.backingOff, run.waitingReason, run.message = true, false, "", ""
				run.started, run.lastRun = started, started
				run.ready = container.ReadinessProbe == nil
			})
		}
		probes, stopProbes := context.WithCancel(p.ctx)
		if process != nil {
			p.probe(probes, i, container, process)
		}
		code := <-exited
		stopProbes()
		finished := time.Now()
		if finished.Sub(started) >= backOffReset {
			failures = 0
		}
		restart := shouldRestart(p.pod.Spec.RestartPolicy, code) && p.ctx.Err() == nil
		p.update(i, func(run *containerRun) {
			run.running, run.ready = false, false
			run.exited, run.exitCode, run.finished = true, code, finished
			run.terminated, run.backingOff = !restart, restart
		})
		if !restart {
			return
		}
		failures++
		select {
		case <-p.ctx.Done():
			p.update(i, func(run *containerRun) { run.terminated, run.backingOff = true, false })
			return
		case <-time.After(restartDelay(failures)):
		}
		p.update(i, func(run *containerRun) { run.restarts++ })
	}
}

// startProcess starts container's program through `kube-local
// exec-container` in a mount namespace of its own; exited receives its
// exit code (128+signal when killed, as the kubelet reports it).
func (p *execPod) startProcess(container *corev1.Container) (*os.Process, <-chan int32, error) {
	self, err := os.Executable()
	if err != nil {
		return nil, nil, err
	}
	args := []string{"exec-container"}
	if p.automountsToken() {
		args = append(args, "--bind", filepath.Join(p.dir, "serviceaccount")+"="+serviceAccountMount)
	}
	for _, mount := range container.VolumeMounts {
		if p.isEmptyDir(mount.Name) {
			args = append(args, "--bind", filepath.Join(p.dir, "volumes", mount.Name)+"="+mount.MountPath)
		}
	}
	args = append(args, "--")
	env := containerEnv(p.pod, container, filepath.Join(p.dir, "home"), p.k.apiHost, p.k.apiPort)
	args = append(args, containerArgv(p.programs[container.Name], container, env)...)
	logFile, err := os.OpenFile(p.logFile(container.Name), os.O_CREATE|os.O_WRONLY|os.O_APPEND, 0o644)
	if err != nil {
		return nil, nil, err
	}
	cmd := exec.Command(self, args...)
	cmd.Env = env
	cmd.Dir = "/"
	cmd.Stdout, cmd.Stderr = logFile, logFile
	cmd.SysProcAttr = &syscall.SysProcAttr{Unshareflags: syscall.CLONE_NEWNS, Setpgid: true, Pdeathsig: syscall.SIGKILL}
	if network := p.network(); network != nil {
		err = network.start(cmd.Start)
	} else {
		err = cmd.Start()
	}
	if err != nil {
		logFile.Close()
		return nil, nil, fmt.Errorf("starting %s: %w", container.Name, err)
	}
	p.mu.Lock()
	p.procs[container.Name] = cmd.Process
	p.mu.Unlock()
	exited := make(chan int32, 1)
	go func() {
		err := cmd.Wait()
		logFile.Close()
		p.mu.Lock()
		delete(p.procs, container.Name)
		p.mu.Unlock()
		exited <- exitCode(err)
	}()
	return cmd.Process, exited, nil
}

func (p *execPod) isEmptyDir(volume string) bool {
	for _, v := range p.pod.Spec.Volumes {
		if v.Name == volume {
			return v.EmptyDir != nil
		}
	}
	return false
}

func exitCode(err error) int32 {
	var exit *exec.ExitError
	if !errors.As(err, &exit) {
		if err == nil {
			return 0
		}
		return 128
	}
	if status, ok := exit.Sys().(syscall.WaitStatus); ok && status.Signaled() {
		return 128 + int32(status.Signal())
	}
	return int32(exit.ExitCode())
}

func closedWith(code int32) <-chan int32 {
	c := make(chan int32, 1)
	c <- code
	return c
}

// stop ends every container: SIGTERM to its process group, SIGKILL after
// grace; returns once all loops have ended.
func (p *execPod) stop(grace time.Duration) {
	p.cancel()
	p.signalAll(syscall.SIGTERM)
	finished := make(chan struct{})
	go func() { p.loops.Wait(); close(finished) }()
	select {
	case <-finished:
	case <-time.After(grace):
		p.signalAll(syscall.SIGKILL)
		<-finished
	}
}

func (p *execPod) signalAll(signal syscall.Signal) {
	p.mu.Lock()
	defer p.mu.Unlock()
	for _, process := range p.procs {
		_ = syscall.Kill(-process.Pid, signal)
	}
}

// kill ends one container's process after a failed liveness probe, as
// the kubelet does: SIGTERM, then SIGKILL after the grace period.
func (p *execPod) kill(process *os.Process) {
	_ = syscall.Kill(-process.Pid, syscall.SIGTERM)
	grace := time.Duration(corev1.DefaultTerminationGracePeriodSeconds) * time.Second
	if p.pod.Spec.TerminationGracePeriodSeconds != nil {
		grace = time.Duration(*p.pod.Spec.TerminationGracePeriodSeconds) * time.Second
	}
	go func() {
		time.Sleep(grace)
		_ = syscall.Kill(-process.Pid, syscall.SIGKILL)
	}()
}

// update changes container i's run and reports the pod's new status.
func (p *execPod) update(i int, change func(*containerRun)) {
	p.mu.Lock()
	change(&p.runs[i])
	p.mu.Unlock()
	p.changed()
}

func (p *execPod) changed() {
	select {
	case p.reports <- struct{}{}:
	default:
	}
}

// report writes the pod's status after each change, coalescing bursts,
// until the pod stops.
func (p *execPod) report() {
	pods := p.k.client.CoreV1().Pods(p.pod.Namespace)
	for {
		select {
		case <-p.stopped:
			return
		case <-p.reports:
		}
		err := retry.RetryOnConflict(retry.DefaultBackoff, func() error {
			live, err := pods.Get(context.Background(), p.pod.Name, metav1.GetOptions{})
			if err != nil {
				return err
			}
			if live.UID != p.pod.UID {
				return nil
			}
			live.Status = p.status(live)
			_, err = pods.UpdateStatus(context.Background(), live, metav1.UpdateOptions{})
			return err
		})
		if err != nil && !apierrors.IsNotFound(err) {
			fmt.Fprintf(os.Stderr, "exec-kubelet: pod %s/%s: writing status: %v\n", p.pod.Namespace, p.pod.Name, err)
			time.AfterFunc(time.Second, p.changed)
		}
	}
}

// status is the pod's status now; live is the pod as stored.
func (p *execPod) status(live *corev1.Pod) corev1.PodStatus {
	p.mu.Lock()
	runs := append([]containerRun(nil), p.runs...)
	p.mu.Unlock()
	now := metav1.Now()
	started := live.CreationTimestamp
	if live.Status.StartTime != nil {
		started = *live.Status.StartTime
	}
	qos := live.Status.QOSClass
	if qos == "" {
		qos = v1qos.GetPodQOS(live)
	}
	status := corev1.PodStatus{
		Phase:     podPhase(runs),
		HostIP:    execPodIP,
		HostIPs:   []corev1.HostIP{{IP: execPodIP}},
		PodIP:     execPodAddress(live),
		PodIPs:    []corev1.PodIP{{IP: execPodAddress(live)}},
		StartTime: &started,
		QOSClass:  qos,
	}
	ready := status.Phase == corev1.PodRunning
	for _, run := range runs {
		status.ContainerStatuses = append(status.ContainerStatuses, containerStatus(run))
		ready = ready && run.ready
	}
	condition := func(kind corev1.PodConditionType, ok bool) corev1.PodCondition {
		value := corev1.ConditionFalse
		if ok {
			value = corev1.ConditionTrue
		}
		// Keep the transition time of a condition that did not change.
		for _, old := range live.Status.Conditions {
			if old.Type == kind && old.Status == value {
				return old
			}
		}
		return corev1.PodCondition{Type: kind, Status: value, LastTransitionTime: now}
	}
	status.Conditions = []corev1.PodCondition{
		condition(corev1.PodScheduled, true),
		condition(corev1.PodInitialized, true),
		condition(corev1.ContainersReady, ready),
		condition(corev1.PodReady, ready),
	}
	return status
}
