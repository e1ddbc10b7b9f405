package tlsfiles

import (
	"crypto/x509"
	"fmt"
	"os"
)

// LoadCertPool reads a PEM bundle of CA certificates (--ca-file,
// --etcd-ca, --admin-client-ca). A file without a single certificate is
// an error: trusting nobody is never what was meant.
func LoadCertPool(path string) (*x509.CertPool, error) {
	pem, err := os.ReadFile(path)
	if err != nil {
		return nil, err
	}
	pool := x509.NewCertPool()
	if !pool.AppendCertsFromPEM(pem) {
		return nil, fmt.Errorf("%s: no PEM certificates in it", path)
	}
	return pool, nil
}
