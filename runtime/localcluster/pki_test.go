package localcluster

import (
	"bytes"
	"crypto/x509"
	"encoding/pem"
	"os"
	"path/filepath"
	"testing"
)

func TestEnsurePKI(t *testing.T) {
	dir := t.TempDir()
	p, err := ensurePKI(dir)
	if err != nil {
		t.Fatal(err)
	}
	tests := []struct {
		name    string
		kp      *keyPair
		issuer  *keyPair
		dns, ip string
	}{
		{"apiserver", p.APIServer, p.CA, "kubernetes.default.svc", "127.0.0.1"},
		{"webhook", p.Webhook, p.CA, "localhost", "127.0.0.1"},
		{"kueue-webhook", p.Kueue, p.KueueCA, "kueue-webhook-service.kueue-system.svc", "127.0.0.1"},
	}
	// Every operator with a certificate rotator gets its own CA (training-operator's files keep
	// their names from before the registry: training-ca, training-webhook).
	for _, op := range operators() {
		if w := op.Webhooks; w != nil && w.RotatorSecret != "" {
			pair := p.rotators[rotatorCertName(op)]
			tests = append(tests, struct {
				name    string
				kp      *keyPair
				issuer  *keyPair
				dns, ip string
			}{rotatorCertName(op) + "-webhook", pair.Serving, pair.CA, w.RotatorService, "127.0.0.1"})
		}
	}
	if _, ok := p.rotators["training"]; !ok {
		t.Errorf("no rotator certificates for training-operator")
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			pool := x509.NewCertPool()
			pool.AddCert(tc.issuer.cert)
			if _, err := tc.kp.cert.Verify(x509.VerifyOptions{DNSName: tc.dns, Roots: pool}); err != nil {
				t.Errorf("verify for %s: %v", tc.dns, err)
			}
			if _, err := tc.kp.cert.Verify(x509.VerifyOptions{DNSName: tc.ip, Roots: pool}); err != nil {
				t.Errorf("verify for %s: %v", tc.ip, err)
			}
			// The cert-controller rotators reject PKCS#8: keys must be PKCS#1.
			if b, _ := pem.Decode(tc.kp.KeyPEM); b == nil || b.Type != "RSA PRIVATE KEY" {
				t.Errorf("key is not PKCS#1 PEM")
			}
			st, err := os.Stat(filepath.Join(dir, tc.name+".key"))
			if err != nil {
				t.Fatal(err)
			}
			if st.Mode().Perm() != 0o600 {
				t.Errorf("key mode %v, want 0600", st.Mode().Perm())
			}
		})
	}
	if len(p.Admin.cert.Subject.Organization) != 1 || p.Admin.cert.Subject.Organization[0] != "system:masters" {
		t.Errorf("admin organization %v, want [system:masters]", p.Admin.cert.Subject.Organization)
	}
	again, err := ensurePKI(dir)
	if err != nil {
		t.Fatal(err)
	}
	if !bytes.Equal(again.CA.CertPEM, p.CA.CertPEM) || !bytes.Equal(again.Kueue.KeyPEM, p.Kueue.KeyPEM) {
		t.Errorf("second ensurePKI regenerated certificates instead of loading them")
	}
}
