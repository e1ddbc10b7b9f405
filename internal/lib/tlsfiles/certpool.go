package tlsfiles

import (
	"crypto/tls"
	"crypto/x509"
	"fmt"

	"github.com/vminit/vminit/internal/lib/inputfile"
)

// MaxPEMSize bounds a PEM file: a CA bundle of every public root is a few
// hundred kilobytes.
const MaxPEMSize = 16 << 20

// LoadCertPool reads a PEM bundle of CA certificates (--ca-file,
// --etcd-ca, --admin-client-ca). A file without a single certificate is
// an error: trusting nobody is never what was meant.
func LoadCertPool(path string) (*x509.CertPool, error) {
	pem, err := inputfile.Read(path, MaxPEMSize)
	if err != nil {
		return nil, err
	}
	pool := x509.NewCertPool()
	if !pool.AppendCertsFromPEM(pem) {
		return nil, fmt.Errorf("%s: no PEM certificates in it", path)
	}
	return pool, nil
}

// LoadKeyPair is tls.LoadX509KeyPair reading its files as every input is
// read (package inputfile): without blocking, regular files only, so that
// a FIFO neither hangs start-up nor, swapped in later, a handshake that
// reloads the pair.
func LoadKeyPair(certFile, keyFile string) (tls.Certificate, error) {
	cert, err := inputfile.Read(certFile, MaxPEMSize)
	if err != nil {
		return tls.Certificate{}, err
	}
	key, err := inputfile.Read(keyFile, MaxPEMSize)
	if err != nil {
		return tls.Certificate{}, err
	}
	return tls.X509KeyPair(cert, key)
}
