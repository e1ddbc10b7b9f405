package kubetest

import (
	"bytes"
	"context"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	authenticationv1 "k8s.io/api/authentication/v1"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/dynamic"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/rest"
	"k8s.io/client-go/tools/clientcmd"
	clientcmdapi "k8s.io/client-go/tools/clientcmd/api"
)

// Account is one identity on the server: a bearer token, and the same as a
// client configuration and as a kubeconfig file.
type Account struct {
	// User is the user name the API server authenticates the token as
	// ("admin", "system:serviceaccount:NAMESPACE:NAME").
	User string
	// Token is the bearer token.
	Token string
	// Kubeconfig is the path of a kubeconfig file whose current context
	// is this account on this server, for commands that take
	// --kubeconfig. Its namespace is "default" for the admin and a
	// service account's own namespace for one.
	Kubeconfig string

	srv *Server
}

func (s *Server) newAccount(t testing.TB, user, token, namespace string) Account {
	t.Helper()
	a := Account{User: user, Token: token, srv: s}
	name := strings.NewReplacer(":", "-", "/", "-").Replace(user)
	a.Kubeconfig = filepath.Join(s.dir, "kubeconfig-"+name)
	cfg := clientcmdapi.NewConfig()
	cfg.Clusters["kubetest"] = &clientcmdapi.Cluster{Server: s.URL, CertificateAuthorityData: s.ca}
	cfg.AuthInfos[name] = &clientcmdapi.AuthInfo{Token: token}
	cfg.Contexts["kubetest"] = &clientcmdapi.Context{Cluster: "kubetest", AuthInfo: name, Namespace: namespace}
	cfg.CurrentContext = "kubetest"
	if err := clientcmd.WriteToFile(*cfg, a.Kubeconfig); err != nil {
		t.Fatal(err)
	}
	return a
}

// Config returns a new client configuration for the account (a copy the
// caller may change). It trusts the server's CA; it does not throttle on
// the client side, since tests measure the server, not client-go's rate
// limiter.
func (a *Account) Config() *rest.Config {
	return &rest.Config{
		Host:            a.srv.URL,
		BearerToken:     a.Token,
		TLSClientConfig: rest.TLSClientConfig{CAData: append([]byte(nil), a.srv.ca...)},
		QPS:             -1,
		UserAgent:       "kubetest",
	}
}

// Clientset returns a typed client for the account.
func (a *Account) Clientset(t testing.TB) kubernetes.Interface {
	t.Helper()
	cs, err := kubernetes.NewForConfig(a.Config())
	if err != nil {
		t.Fatal(err)
	}
	return cs
}

// Dynamic returns a client for any resource, custom ones included.
func (a *Account) Dynamic(t testing.TB) dynamic.Interface {
	t.Helper()
	dc, err := dynamic.NewForConfig(a.Config())
	if err != nil {
		t.Fatal(err)
	}
	return dc
}

func (s *Server) clientset() (kubernetes.Interface, error) {
	return kubernetes.NewForConfig(s.Config())
}

// Kubectl runs the kubectl that install-kube-apiserver.sh built (release
// Version; the test skips or fails as for a missing tool when it is not
// there) as this account, and returns its standard output. The error, if
// any, carries the standard error. It runs with HOME in a temporary
// directory, so its discovery cache stays out of the user's ~/.kube, and
// is killed after 2 minutes.
func (a *Account) Kubectl(t testing.TB, args ...string) (string, error) {
	t.Helper()
	bin := Binary(t, "kubectl")
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	cmd := exec.CommandContext(ctx, bin, append([]string{"--kubeconfig", a.Kubeconfig}, args...)...)
	home := t.TempDir()
	cmd.Env = append(os.Environ(), "HOME="+home, "KUBECONFIG="+a.Kubeconfig, "KUBECACHEDIR="+filepath.Join(home, "cache"))
	var stdout, stderr bytes.Buffer
	cmd.Stdout, cmd.Stderr = &stdout, &stderr
	if err := cmd.Run(); err != nil {
		return stdout.String(), fmt.Errorf("kubectl %s: %v\n%s", strings.Join(args, " "), err, stderr.String())
	}
	return stdout.String(), nil
}

// ServiceAccount makes sure namespace and the ServiceAccount name in it
// exist (creating either when missing, as a test's manifests may already
// have), and returns an account holding a token the API server issued for
// it (valid for an hour). It has only the rights that RBAC objects grant
// it: tests bind the Roles they mean to check.
func (s *Server) ServiceAccount(t testing.TB, namespace, name string) *Account {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	cs := s.Clientset(t)
	_, err := cs.CoreV1().Namespaces().Create(ctx, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: namespace}}, metav1.CreateOptions{})
	if err != nil && !apierrors.IsAlreadyExists(err) {
		t.Fatalf("namespace %s: %v", namespace, err)
	}
	_, err = cs.CoreV1().ServiceAccounts(namespace).Create(ctx,
		&corev1.ServiceAccount{ObjectMeta: metav1.ObjectMeta{Name: name}}, metav1.CreateOptions{})
	if err != nil && !apierrors.IsAlreadyExists(err) {
		t.Fatalf("serviceaccount %s/%s: %v", namespace, name, err)
	}
	hour := int64(3600)
	tr, err := cs.CoreV1().ServiceAccounts(namespace).CreateToken(ctx, name,
		&authenticationv1.TokenRequest{Spec: authenticationv1.TokenRequestSpec{ExpirationSeconds: &hour}}, metav1.CreateOptions{})
	if err != nil {
		t.Fatalf("token for serviceaccount %s/%s: %v", namespace, name, err)
	}
	a := s.newAccount(t, "system:serviceaccount:"+namespace+":"+name, tr.Status.Token, namespace)
	return &a
}
