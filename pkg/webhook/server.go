package webhook

import (
	"context"
	"crypto/tls"
	"crypto/x509"
	"fmt"
	"net"
	"net/http"
	"path/filepath"
	"time"

	"github.com/go-logr/logr"
	"github.com/prometheus/client_golang/prometheus"
	coordinationv1 "k8s.io/api/coordination/v1"
	corev1 "k8s.io/api/core/v1"
	resourceapi "k8s.io/api/resource/v1"
	schedulingv1 "k8s.io/api/scheduling/v1"
	"k8s.io/apimachinery/pkg/api/meta"
	"k8s.io/apimachinery/pkg/fields"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/apimachinery/pkg/runtime"
	clientgoscheme "k8s.io/client-go/kubernetes/scheme"
	"k8s.io/client-go/rest"
	toolscache "k8s.io/client-go/tools/cache"
	"k8s.io/dynamic-resource-allocation/deviceclass/extendedresourcecache"
	"k8s.io/utils/clock"
	"k8s.io/utils/ptr"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/cache"
	"sigs.k8s.io/controller-runtime/pkg/certwatcher"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/event"
	"sigs.k8s.io/controller-runtime/pkg/manager"
	"sigs.k8s.io/controller-runtime/pkg/metrics"
	metricsserver "sigs.k8s.io/controller-runtime/pkg/metrics/server"
	"sigs.k8s.io/controller-runtime/pkg/webhook"
	"sigs.k8s.io/controller-runtime/pkg/webhook/admission"

	"github.com/gpuadmit/gpuadmit/pkg/allocator"
	"github.com/gpuadmit/gpuadmit/pkg/claim"
	"github.com/gpuadmit/gpuadmit/pkg/handover"
	"github.com/gpuadmit/gpuadmit/pkg/inventory"
	"github.com/gpuadmit/gpuadmit/pkg/mutate"
	"github.com/gpuadmit/gpuadmit/pkg/mutate/record"
	"github.com/gpuadmit/gpuadmit/pkg/policy"
	"github.com/gpuadmit/gpuadmit/pkg/quota"
)

// MutatePath is where the webhook serves. gpuadmit's record is guarded on
// UPDATE by a ValidatingAdmissionPolicy in the API server
// (deploy/base/recordpolicy.yaml), not by a webhook.
const MutatePath = "/mutate-v1-pod"

// MutateJobPath is where the webhook decides the pod templates of
// Kueue-managed batch/v1 Jobs.
const MutateJobPath = "/mutate-batch-v1-job"

var certExpiry = prometheus.NewGauge(prometheus.GaugeOpts{
	Name: "gpuadmit_webhook_certificate_expiry_timestamp_seconds",
	Help: "When the serving certificate in use expires (Unix time).",
})

func init() { metrics.Registry.MustRegister(certExpiry) }

// Run runs opts.Role's parts of gpuadmit until ctx ends: it serves the
// webhook (then stops accepting reviews and drains those in flight), runs
// the reconcilers, or both.
func Run(ctx context.Context, cfg *rest.Config, opts Options, log logr.Logger) error {
	for _, ln := range []net.Listener{opts.ProbeListener, opts.MetricsListener, opts.PprofListener} {
		if ln != nil {
			defer ln.Close()
		}
	}
	opts.defaults()
	scheme := runtime.NewScheme()
	if err := clientgoscheme.AddToScheme(scheme); err != nil {
		return err
	}
	cw, err := servingCert(opts)
	if err != nil {
		return err
	}
	mgr, err := newManager(ctx, cfg, scheme, opts, cw, log)
	if err != nil {
		return err
	}
	if cw != nil {
		if err := mgr.Add(cw); err != nil {
			return err
		}
	}
	engine := policy.NewEngine(policy.Options{EvalTimeout: opts.EvalTimeout, Validate: validSet})
	trigger := make(chan event.TypedGenericEvent[*corev1.Namespace], 1024)
	var onLoad func(*policy.Set)
	if opts.Role.reconciles() {
		onLoad = resync(mgr, trigger)
	}
	watcher, err := addPolicies(ctx, mgr, engine, opts, log, onLoad)
	if err != nil {
		return err
	}
	checks := []check{policyCheck(engine, watcher), cacheCheck(mgr)}
	if opts.Role.reconciles() {
		if err := addReconcilers(mgr, engine, trigger, log); err != nil {
			return err
		}
		if err := addHandover(ctx, mgr, opts); err != nil {
			return err
		}
	}
	if opts.Role.serves() {
		keys, err := addServing(ctx, mgr, engine, scheme, opts, log)
		if err != nil {
			return err
		}
		checks = append(checks, servingCheck(mgr), recordKeyCheck(keys))
	}
	if opts.Role.reconciles() {
		if err := addUsage(ctx, mgr, engine, log); err != nil {
			return err
		}
	}
	if err := mgr.Add(&probes{addr: opts.ProbeAddr, ln: opts.ProbeListener, checks: checks, log: log}); err != nil {
		return err
	}
	if err := addServed(mgr, opts, log); err != nil {
		return err
	}
	log.Info("starting gpuadmit", "role", opts.Role, "port", opts.Port, "policies", policyName(opts.Policies))
	return mgr.Start(ctx)
}

// servingCert watches the serving certificate of a role that serves; nil for the controller.
func servingCert(opts Options) (*certwatcher.CertWatcher, error) {
	if !opts.Role.serves() {
		return nil, nil
	}
	cw, err := certwatcher.New(filepath.Join(opts.CertDir, "tls.crt"), filepath.Join(opts.CertDir, "tls.key"))
	if err != nil {
		return nil, fmt.Errorf("serving certificate in %s: %w", opts.CertDir, err)
	}
	cw.RegisterCallback(observeExpiry)
	return cw, nil
}

// addReconcilers adds the writers: the quota reconciler, and the share claim
// template reconciler where the cluster has DRA. Both run on the leader only.
func addReconcilers(mgr manager.Manager, engine *policy.Engine, trigger <-chan event.TypedGenericEvent[*corev1.Namespace], log logr.Logger) error {
	if err := quota.NewReconciler(mgr.GetClient(), engineQuotas{engine}, mgr.GetEventRecorder("gpuadmit-quota")).SetupWithManager(mgr, trigger); err != nil {
		return err
	}
	dra, err := servesDRA(mgr)
	if err != nil {
		return err
	}
	if !dra {
		log.Info("The cluster serves no resource.k8s.io/v1; no share claim templates to keep")
		return nil
	}
	return claim.NewReconciler(mgr.GetClient(), mgr.GetEventRecorder("gpuadmit-claims"), nil).SetupWithManager(mgr)
}

// addServing adds what admission reviews read (inventory, record keys, free
// capacity, gpuadmit-scheduler's Lease) and registers the handlers. It
// returns the record keys (nil without --record-key-dir) for readiness.
func addServing(ctx context.Context, mgr manager.Manager, engine *policy.Engine, scheme *runtime.Scheme, opts Options, log logr.Logger) (record.KeySource, error) {
	live, err := addInventory(ctx, mgr, log)
	if err != nil {
		return nil, err
	}
	keys, err := addRecordKeys(mgr, opts, log)
	if err != nil {
		return nil, err
	}
	capa, err := addCapacity(ctx, mgr, log)
	if err != nil {
		return nil, err
	}
	sched, err := addSchedulers(ctx, mgr, log)
	if err != nil {
		return nil, err
	}
	registerHandlers(mgr, engine, live, keys, capa, sched, scheme, opts)
	return keys, nil
}

func newManager(ctx context.Context, cfg *rest.Config, scheme *runtime.Scheme, opts Options, cw *certwatcher.CertWatcher, log logr.Logger) (manager.Manager, error) {
	timeout := opts.ShutdownTimeout
	metricsAddr, pprofAddr := opts.MetricsAddr, opts.PprofAddr
	if opts.MetricsListener != nil {
		metricsAddr = "0" // served on the listener (addServed)
	}
	if opts.PprofListener != nil {
		pprofAddr = ""
	}
	return ctrl.NewManager(cfg, manager.Options{
		Scheme:                  scheme,
		Logger:                  log,
		Metrics:                 metricsserver.Options{BindAddress: metricsAddr},
		HealthProbeBindAddress:  "0", // probes are served by probes, with detail
		PprofBindAddress:        pprofAddr,
		GracefulShutdownTimeout: &timeout,
		LeaderElection:          opts.leaderElects(),
		LeaderElectionID:        "gpuadmit-quota",
		LeaderElectionNamespace: opts.LeaderElectionNamespace,
		Cache:                   cacheOptions(ctx, opts),
		WebhookServer:           webhookServer(opts, cw),
	})
}

// cacheOptions are what the manager's cache holds: only the objects
// gpuadmit reads, each stripped to the fields it reads (see StripPod,
// inventory.StripNode, SliceTransform and docs/scale.md for what each costs), counted by
// kind (gpuadmit_cache_objects) until ctx ends.
func cacheOptions(ctx context.Context, opts Options) cache.Options {
	o := cache.Options{
		NewInformer:      cacheObjects.newInformer(ctx),
		DefaultTransform: cache.TransformStripManagedFields(),
		// Free capacity and the claim-template reconciler need only
		// the pods gpuadmit placed, not every pod of the cluster; the
		// reconciler picks those with share claims itself. Pods keep
		// only what their readers read (StripPod), Nodes only what
		// the inventory reads: whole ones (images, env, statuses)
		// would not fit the webhook's memory limit.
		ByObject: map[client.Object]cache.ByObject{
			&corev1.Pod{}:  {Label: labels.SelectorFromSet(labels.Set{mutate.LabelManaged: "true"}), Transform: StripPod},
			&corev1.Node{}: {Transform: inventory.StripNode},
			// Only gpuadmit's driver's ResourceSlices: the inventory and
			// the usage report read no other, and other drivers'
			// (NVIDIA's partitionable devices) are large. The API server
			// selects ResourceSlices by spec.driver (pkg/registry/resource/
			// resourceslice's selectable fields). Each keeps only what
			// those two read, as this role reads it (SliceTransform).
			&resourceapi.ResourceSlice{}: {
				Field:     fields.OneTermEqualSelector(resourceapi.ResourceSliceSelectorDriver, allocator.DRADriver),
				Transform: SliceTransform(opts.Role),
			},
			// Only gpuadmit-scheduler's Lease, not the nodes' heartbeats.
			&coordinationv1.Lease{}: {
				Namespaces: map[string]cache.Config{opts.SchedulerLeaseNamespace: {}},
				Field:      fields.OneTermEqualSelector("metadata.name", SchedulerName),
			},
			// Only the record of gpuadmit-scheduler's pools (pkg/handover).
			&corev1.ConfigMap{}: {
				Namespaces: map[string]cache.Config{opts.SchedulerLeaseNamespace: {}},
				Field:      fields.OneTermEqualSelector("metadata.name", handover.ConfigMapName),
			},
		},
	}
	if !opts.Role.reconciles() {
		// Only the claims of pods with DRA alternatives (free capacity);
		// the usage report, where this process runs it, reads them all.
		o.ByObject[&resourceapi.ResourceClaim{}] = cache.ByObject{Label: labels.SelectorFromSet(labels.Set{claim.LabelAlternatives: "true"})}
	}
	return o
}

// webhookServer is the TLS server of a role that serves; nil (a default the
// manager never starts, as nothing registers with it) for the controller.
func webhookServer(opts Options, cw *certwatcher.CertWatcher) webhook.Server {
	if cw == nil {
		return nil
	}
	return webhook.NewServer(webhook.Options{
		Host:    opts.Host,
		Port:    opts.Port,
		CertDir: opts.CertDir,
		TLSOpts: TLSOptions(cw.GetCertificate),
	})
}

// TLSOptions configure the webhook's TLS server: the serving certificate
// from getCert (reloaded from disk), and HTTP/1.1 only. HTTP/2 is off, as
// kubebuilder's scaffolds turn it off: its stream multiplexing is what the
// rapid-reset attacks (CVE-2023-44487, CVE-2023-39325) abuse, and the API
// server, the webhook's one client, speaks HTTP/1.1 to webhooks just as well.
func TLSOptions(getCert func(*tls.ClientHelloInfo) (*tls.Certificate, error)) []func(*tls.Config) {
	return []func(*tls.Config){func(c *tls.Config) {
		c.GetCertificate = getCert
		c.NextProtos = []string{"http/1.1"}
	}}
}

// observeExpiry sets the expiry gauge from the serving certificate. Leaf is
// parsed only where the key pair was loaded with it (GODEBUG x509keypairleaf).
func observeExpiry(c tls.Certificate) {
	leaf := c.Leaf
	if leaf == nil && len(c.Certificate) > 0 {
		leaf, _ = x509.ParseCertificate(c.Certificate[0])
	}
	if leaf != nil {
		certExpiry.Set(float64(leaf.NotAfter.Unix()))
	}
}

// addPolicies loads the embedded set once, or watches the policy path.
func addPolicies(ctx context.Context, mgr manager.Manager, engine *policy.Engine, opts Options, log logr.Logger, onLoad func(*policy.Set)) (*policy.Watcher, error) {
	if opts.Policies == "" {
		_, err := engine.Load(ctx, policy.Embedded())
		return nil, err
	}
	ev := mgr.GetEventRecorder("gpuadmit-webhook")
	w := policy.NewWatcher(engine, opts.Policies, log.WithName("policy"), policy.WatchOptions{
		Interval:  opts.PolicyInterval,
		OnFailure: policyEvents(ev, opts.PodName, opts.PodNamespace),
		OnLoad:    onLoad,
	})
	return w, mgr.Add(w)
}

// addInventory builds pools from the Node informer, in the background, and
// warms the Namespace and PriorityClass informers.
func addInventory(ctx context.Context, mgr manager.Manager, log logr.Logger) (*inventory.Live, error) {
	live := inventory.NewLive(mgr.GetCache(), allocator.Default(), log.WithName("inventory"))
	live.Events = mgr.GetEventRecorder("gpuadmit-inventory")
	if err := follow(ctx, mgr, &corev1.Node{}, live.Handler()); err != nil {
		return nil, err
	}
	if err := mgr.Add(live); err != nil { // rebuilds in the background
		return nil, err
	}
	if err := addSlices(ctx, mgr, live, log); err != nil {
		return nil, err
	}
	if _, err := mgr.GetCache().GetInformer(ctx, &corev1.Namespace{}); err != nil {
		return nil, fmt.Errorf("namespace informer: %w", err)
	}
	if _, err := mgr.GetCache().GetInformer(ctx, &schedulingv1.PriorityClass{}); err != nil {
		return nil, fmt.Errorf("priorityclass informer: %w", err)
	}
	return live, nil
}

// addSlices reads ResourceSlices where the cluster serves resource.k8s.io/v1
// (Kubernetes 1.34 and later), so the inventory knows the nodes of
// gpuadmit's DRA driver; elsewhere every pool is a device-plugin pool.
func addSlices(ctx context.Context, mgr manager.Manager, live *inventory.Live, log logr.Logger) error {
	err := follow(ctx, mgr, &resourceapi.ResourceSlice{}, live.Handler())
	if meta.IsNoMatchError(err) {
		log.Info("The cluster serves no resource.k8s.io/v1; device-plugin pools only")
		return nil
	}
	if err != nil {
		return err
	}
	live.Slices = mgr.GetCache()
	// Which DeviceClass owns an extended resource, decided as the scheduler
	// decides it (the same cache), so a newer foreign class that takes
	// nvidia.com/gpu is seen.
	classes := extendedresourcecache.NewExtendedResourceCache(log.WithName("deviceclasses"), live.Handler())
	if err := follow(ctx, mgr, &resourceapi.DeviceClass{}, classes); err != nil {
		return err
	}
	live.Classes = classes
	return nil
}

// addRecordKeys loads the record keys and reloads them; nil without a directory.
func addRecordKeys(mgr manager.Manager, opts Options, log logr.Logger) (record.KeySource, error) {
	if opts.RecordKeyDir == "" {
		log.Info("no --record-key-dir: records are not sealed, and pods that come back are decided again")
		return nil, nil
	}
	missing := recordKeyEvents(mgr.GetEventRecorder("gpuadmit-webhook"), opts.PodName, opts.PodNamespace, opts.RecordKeyDir)
	keys, err := newRecordKeys(opts.RecordKeyDir, opts.PolicyInterval, log.WithName("recordkeys"), missing)
	if err != nil {
		return nil, err
	}
	return keys, mgr.Add(keys)
}

// addCapacity sums gpuadmit's pods by node (or pool, before they have one)
// as the Pod informer sees them, and where the cluster serves DRA the
// devices allocated to pods with alternatives by node, so that pool choice
// sees free capacity, not allocatable only.
func addCapacity(ctx context.Context, mgr manager.Manager, log logr.Logger) (*capacity, error) {
	capa := newCapacity(nil, log.WithName("capacity"))
	if err := follow(ctx, mgr, &corev1.Pod{}, capa.Handler()); err != nil {
		return nil, err
	}
	dra, err := servesDRA(mgr)
	if err != nil || !dra {
		return capa, err
	}
	capa.claims = newAltClaims()
	return capa, follow(ctx, mgr, &resourceapi.ResourceClaim{}, capa.claims.Handler())
}

func registerHandlers(mgr manager.Manager, engine *policy.Engine, live *inventory.Live, keys record.KeySource, capa *capacity, sched *schedulers, scheme *runtime.Scheme, opts Options) {
	m := mutate.NewMutator(engine, live, mutate.MutatorOptions{PriorityClasses: priorityClasses{cache: mgr.GetCache(), api: mgr.GetAPIReader()}, RecordKeys: keys, Capacity: capa, Schedulers: sched,
		SealWindow: opts.SealWindow, Workloads: jobs{mgr.GetAPIReader()}, NoAlternatives: opts.NoDRAAlternatives, Demand: demand(opts.PoolPick, capa)})
	ho := mutate.HandlerOptions{
		Quotas:   quotas{mgr.GetCache()},
		Recorder: recorder{ev: mgr.GetEventRecorder("gpuadmit-webhook"), admitted: opts.PodEvents},
	}
	h := mutate.NewHandler(m, namespaces{cache: mgr.GetCache(), api: mgr.GetAPIReader()}, scheme, ho)
	srv := mgr.GetWebhookServer()
	srv.Register(MutatePath, &admission.Webhook{Handler: h, RecoverPanic: ptr.To(true), LogConstructor: reviewLogger})
	srv.Register(MutateJobPath, &admission.Webhook{Handler: mutate.NewJobHandler(h), RecoverPanic: ptr.To(true), LogConstructor: reviewLogger})
}

// reviewLogger is the logger of one review: the base with the review's UID.
// controller-runtime's default adds six values (object, namespace, name,
// resource, user, request ID), which zap encodes up front on every review,
// logged or not: about 6% of the webhook's CPU per pod under load. The
// decision line names the pod itself.
func reviewLogger(base logr.Logger, req *admission.Request) logr.Logger {
	if req == nil {
		return base
	}
	return base.WithValues("requestID", req.UID)
}

// addSchedulers follows gpuadmit-scheduler's Lease and the controller's
// record of its pools.
func addSchedulers(ctx context.Context, mgr manager.Manager, log logr.Logger) (*schedulers, error) {
	s := &schedulers{lease: handover.NewLease(clock.RealClock{}), log: log.WithName("schedulers")}
	if err := follow(ctx, mgr, &coordinationv1.Lease{}, s.lease.Handler(nil)); err != nil {
		return nil, err
	}
	return s, follow(ctx, mgr, &corev1.ConfigMap{}, s.RecordHandler())
}

// addHandover runs the handover reconciler (pkg/handover) on the leader:
// it follows gpuadmit-scheduler's Lease itself, by its own clock.
func addHandover(ctx context.Context, mgr manager.Manager, opts Options) error {
	lease := handover.NewLease(clock.RealClock{})
	r := handover.NewReconciler(mgr.GetClient(), lease, mgr.GetEventRecorder("gpuadmit-handover"), opts.SchedulerLeaseNamespace, clock.RealClock{})
	if err := follow(ctx, mgr, &coordinationv1.Lease{}, lease.Handler(r.LeaseChanged)); err != nil {
		return err
	}
	return r.SetupWithManager(mgr)
}

// follow sends the cache's events of obj's kind to h.
func follow(ctx context.Context, mgr manager.Manager, obj client.Object, h toolscache.ResourceEventHandler) error {
	inf, err := mgr.GetCache().GetInformer(ctx, obj)
	if err != nil {
		return fmt.Errorf("%T informer: %w", obj, err)
	}
	_, err = inf.AddEventHandler(h)
	return err
}

// cacheCheck is ready once every informer the role started has synced.
func cacheCheck(mgr manager.Manager) check {
	return check{name: "informers", run: func(r *http.Request) (bool, string) {
		ctx, cancel := context.WithTimeout(r.Context(), time.Second)
		defer cancel()
		if !mgr.GetCache().WaitForCacheSync(ctx) {
			return false, "caches are not synced yet"
		}
		return true, "caches synced"
	}}
}

// servingCheck is ready once the webhook server serves TLS.
func servingCheck(mgr manager.Manager) check {
	started := mgr.GetWebhookServer().StartedChecker()
	return check{name: "webhook", run: func(r *http.Request) (bool, string) {
		if err := started(r); err != nil {
			return false, err.Error()
		}
		return true, "serving TLS"
	}}
}

func policyName(p string) string {
	if p == "" {
		return "embedded"
	}
	return p
}
