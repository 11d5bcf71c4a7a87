package localcluster

import (
	"crypto/rand"
	"crypto/rsa"
	"crypto/x509"
	"crypto/x509/pkix"
	"encoding/pem"
	"errors"
	"fmt"
	"math/big"
	"net"
	"os"
	"path/filepath"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/kueuelab/kueuelab/render"
)

// keyPair is a PEM certificate and its PKCS#1 RSA key. The cert-controller rotators of Kueue and
// training-operator reject PKCS#8 keys in their Secrets (start-up hangs), so every key is PKCS#1.
type keyPair struct {
	CertPEM, KeyPEM []byte
	cert            *x509.Certificate
	key             *rsa.PrivateKey
}

type certSpec struct {
	cn     string
	org    []string
	dns    []string
	ips    []net.IP
	isCA   bool
	usages []x509.ExtKeyUsage
	parent *keyPair // nil: self-signed
	valid  time.Duration
}

func newKeyPair(s certSpec) (*keyPair, error) {
	key, err := rsa.GenerateKey(rand.Reader, 2048)
	if err != nil {
		return nil, fmt.Errorf("generate key for %s: %w", s.cn, err)
	}
	serial, err := rand.Int(rand.Reader, new(big.Int).Lsh(big.NewInt(1), 62))
	if err != nil {
		return nil, err
	}
	now := time.Now().Add(-time.Hour)
	tmpl := &x509.Certificate{
		SerialNumber:          serial,
		Subject:               pkix.Name{CommonName: s.cn, Organization: s.org},
		DNSNames:              s.dns,
		IPAddresses:           s.ips,
		NotBefore:             now,
		NotAfter:              now.Add(s.valid),
		BasicConstraintsValid: true,
		IsCA:                  s.isCA,
		ExtKeyUsage:           s.usages,
		KeyUsage:              x509.KeyUsageDigitalSignature | x509.KeyUsageKeyEncipherment,
	}
	if s.isCA {
		tmpl.KeyUsage |= x509.KeyUsageCertSign
	}
	parentCert, parentKey := tmpl, key
	if s.parent != nil {
		parentCert, parentKey = s.parent.cert, s.parent.key
	}
	der, err := x509.CreateCertificate(rand.Reader, tmpl, parentCert, &key.PublicKey, parentKey)
	if err != nil {
		return nil, fmt.Errorf("sign %s: %w", s.cn, err)
	}
	cert, err := x509.ParseCertificate(der)
	if err != nil {
		return nil, err
	}
	return &keyPair{
		CertPEM: pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: der}),
		KeyPEM:  pem.EncodeToMemory(&pem.Block{Type: "RSA PRIVATE KEY", Bytes: x509.MarshalPKCS1PrivateKey(key)}),
		cert:    cert,
		key:     key,
	}, nil
}

// write stores the pair as <base>.crt (0644) and <base>.key (0600).
func (k *keyPair) write(dir, base string) error {
	if err := os.WriteFile(filepath.Join(dir, base+".crt"), k.CertPEM, 0o644); err != nil {
		return err
	}
	return os.WriteFile(filepath.Join(dir, base+".key"), k.KeyPEM, 0o600)
}

func loadKeyPair(dir, base string) (*keyPair, error) {
	c, err := os.ReadFile(filepath.Join(dir, base+".crt"))
	if err != nil {
		return nil, err
	}
	k, err := os.ReadFile(filepath.Join(dir, base+".key"))
	if err != nil {
		return nil, err
	}
	cb, _ := pem.Decode(c)
	kb, _ := pem.Decode(k)
	if cb == nil || kb == nil {
		return nil, fmt.Errorf("%s/%s: not PEM", dir, base)
	}
	cert, err := x509.ParseCertificate(cb.Bytes)
	if err != nil {
		return nil, fmt.Errorf("%s/%s.crt: %w", dir, base, err)
	}
	key, err := x509.ParsePKCS1PrivateKey(kb.Bytes)
	if err != nil {
		return nil, fmt.Errorf("%s/%s.key: %w", dir, base, err)
	}
	return &keyPair{CertPEM: c, KeyPEM: k, cert: cert, key: key}, nil
}

// pki holds every certificate of one cluster.
type pki struct {
	CA        *keyPair // cluster CA: apiserver serving, clients, JobSet webhook
	APIServer *keyPair
	Admin     *keyPair // O=system:masters
	SA        *keyPair // service-account signing key (its cert is unused)
	Webhook   *keyPair // 127.0.0.1 serving cert for webhooks without their own rotator
	KueueCA   *keyPair // seeded into kueue-system/kueue-webhook-server-cert
	Kueue     *keyPair
	// rotators hold, per operator with a certificate rotator (by rotatorCertName), the CA and
	// serving certificate seeded into its Secret.
	rotators map[string]rotatorPair
}

// rotatorPair is a CA of an operator's own and the serving certificate it signed.
type rotatorPair struct{ CA, Serving *keyPair }

// rotatorCertName names an operator's rotator certificates in the pki dir: <name>-ca, <name>-webhook.
func rotatorCertName(op *render.Operator) string {
	if n := op.Webhooks.CertName; n != "" {
		return n
	}
	return op.Name
}

const tenYears = 10 * 365 * 24 * time.Hour

var loopback = []net.IP{net.IPv4(127, 0, 0, 1)}

// ensurePKI loads the cluster's certificates from dir, creating any that are missing.
func ensurePKI(dir string) (*pki, error) {
	if err := os.MkdirAll(dir, 0o700); err != nil {
		return nil, err
	}
	return loadPKI(dir, true)
}

// ensurePKIReadOnly loads the cluster's certificates and fails if any is missing.
func ensurePKIReadOnly(dir string) (*pki, error) { return loadPKI(dir, false) }

func loadPKI(dir string, create bool) (*pki, error) {
	p := &pki{}
	srv := []x509.ExtKeyUsage{x509.ExtKeyUsageServerAuth}
	type step struct {
		name string
		dst  **keyPair
		spec func() certSpec
	}
	steps := []step{
		{"ca", &p.CA, func() certSpec { return certSpec{cn: "kueuelab-ca", isCA: true, valid: tenYears} }},
		{"apiserver", &p.APIServer, func() certSpec {
			return certSpec{cn: "kube-apiserver", parent: p.CA, usages: srv, valid: tenYears, ips: []net.IP{net.IPv4(127, 0, 0, 1), net.IPv4(10, 0, 0, 1)},
				dns: []string{"localhost", "kubernetes", "kubernetes.default", "kubernetes.default.svc", "kubernetes.default.svc.cluster.local"}}
		}},
		{"admin", &p.Admin, func() certSpec {
			return certSpec{cn: "kubernetes-admin", org: []string{"system:masters"}, parent: p.CA, valid: tenYears,
				usages: []x509.ExtKeyUsage{x509.ExtKeyUsageClientAuth}}
		}},
		{"sa", &p.SA, func() certSpec { return certSpec{cn: "service-accounts", parent: p.CA, valid: tenYears} }},
		{"webhook", &p.Webhook, func() certSpec {
			return certSpec{cn: "127.0.0.1", parent: p.CA, usages: srv, valid: tenYears, ips: loopback, dns: []string{"localhost"}}
		}},
		{"kueue-ca", &p.KueueCA, func() certSpec {
			return certSpec{cn: "kueue-ca", org: []string{"kueue"}, isCA: true, dns: []string{"kueue-ca"}, valid: tenYears}
		}},
		{"kueue-webhook", &p.Kueue, func() certSpec {
			return certSpec{cn: "kueue-webhook-service.kueue-system.svc", parent: p.KueueCA, usages: srv, valid: tenYears,
				dns: []string{"kueue-webhook-service.kueue-system.svc"}, ips: loopback}
		}},
	}
	// Operators with a certificate rotator get a CA of their own, as their Secret expects.
	p.rotators = map[string]rotatorPair{}
	pairs := map[string]*rotatorPair{}
	for _, op := range operators() {
		if op.Webhooks == nil || op.Webhooks.RotatorSecret == "" {
			continue
		}
		name, svc, cn := rotatorCertName(op), op.Webhooks.RotatorService, op.Name+"-ca"
		pair := &rotatorPair{}
		pairs[name] = pair
		steps = append(steps,
			step{name + "-ca", &pair.CA, func() certSpec { return certSpec{cn: cn, isCA: true, dns: []string{cn}, valid: tenYears} }},
			step{name + "-webhook", &pair.Serving, func() certSpec {
				return certSpec{cn: svc, parent: pair.CA, usages: srv, valid: tenYears, dns: []string{svc}, ips: loopback}
			}})
	}
	for _, s := range steps {
		kp, err := loadKeyPair(dir, s.name)
		if create && errors.Is(err, os.ErrNotExist) {
			if kp, err = newKeyPair(s.spec()); err == nil {
				err = kp.write(dir, s.name)
			}
		}
		if err != nil {
			return nil, fmt.Errorf("pki %s: %w", s.name, err)
		}
		*s.dst = kp
	}
	for name, pair := range pairs {
		p.rotators[name] = *pair
	}
	if !create {
		return p, nil
	}
	if err := writePublicKey(filepath.Join(dir, "sa.pub"), &p.SA.key.PublicKey); err != nil {
		return nil, err
	}
	return p, nil
}

func writePublicKey(path string, pub *rsa.PublicKey) error {
	der, err := x509.MarshalPKIXPublicKey(pub)
	if err != nil {
		return err
	}
	return os.WriteFile(path, pem.EncodeToMemory(&pem.Block{Type: "PUBLIC KEY", Bytes: der}), 0o644)
}

// writeCertDir writes tls.crt, tls.key (0600) and ca.crt: the layout controller-runtime's webhook
// server reads.
func writeCertDir(dir string, kp, ca *keyPair) error {
	if err := os.MkdirAll(dir, 0o700); err != nil {
		return err
	}
	if err := kp.write(dir, "tls"); err != nil {
		return err
	}
	return os.WriteFile(filepath.Join(dir, "ca.crt"), ca.CertPEM, 0o644)
}

// seededSecret is the cert-controller Secret a rotator accepts as-is ("no cert refresh needed").
func seededSecret(ns, name string, ca, srv *keyPair) *corev1.Secret {
	return &corev1.Secret{
		TypeMeta:   metav1.TypeMeta{APIVersion: "v1", Kind: "Secret"},
		ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: name},
		Type:       corev1.SecretTypeOpaque,
		Data:       map[string][]byte{"ca.crt": ca.CertPEM, "ca.key": ca.KeyPEM, "tls.crt": srv.CertPEM, "tls.key": srv.KeyPEM},
	}
}
