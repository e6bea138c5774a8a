package main

import (
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/tls"
	"crypto/x509"
	"crypto/x509/pkix"
	"encoding/base64"
	"encoding/json"
	"encoding/pem"
	"fmt"
	"math/big"
	"net"
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kfake"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/berth-dev/berth/internal/kafkatest"
)

// saslServer answers SASLHandshake and SASLAuthenticate for a mechanism
// kfake does not serve (OAUTHBEARER, AWS_MSK_IAM), at the protocol level:
// it records every client's first authentication message and lets check
// decide whether it passes. Everything after authentication is kfake's.
type saslServer struct {
	mu    sync.Mutex
	seen  [][]byte
	check func(auth []byte) (ok bool, reply []byte)
}

func startSASLServer(t *testing.T, mechanism string, check func([]byte) (bool, []byte)) (*kafkatest.Cluster, *saslServer) {
	t.Helper()
	kc := kafkatest.Start(t, 1)
	s := &saslServer{check: check}
	kc.ControlKey(int16(kmsg.SASLHandshake), func(req kmsg.Request) (kmsg.Response, error, bool) {
		kc.KeepControl()
		r := req.(*kmsg.SASLHandshakeRequest)
		resp := r.ResponseKind().(*kmsg.SASLHandshakeResponse)
		resp.SupportedMechanisms = []string{mechanism}
		if r.Mechanism != mechanism {
			resp.ErrorCode = kerr.UnsupportedSaslMechanism.Code
		}
		return resp, nil, true
	})
	kc.ControlKey(int16(kmsg.SASLAuthenticate), func(req kmsg.Request) (kmsg.Response, error, bool) {
		kc.KeepControl()
		r := req.(*kmsg.SASLAuthenticateRequest)
		resp := r.ResponseKind().(*kmsg.SASLAuthenticateResponse)
		s.mu.Lock()
		s.seen = append(s.seen, append([]byte(nil), r.SASLAuthBytes...))
		s.mu.Unlock()
		ok, reply := s.check(r.SASLAuthBytes)
		if !ok {
			resp.ErrorCode = kerr.SaslAuthenticationFailed.Code
			msg := "invalid token"
			resp.ErrorMessage = &msg
		}
		resp.SASLAuthBytes = reply
		return resp, nil, true
	})
	return kc, s
}

func (s *saslServer) messages() [][]byte {
	s.mu.Lock()
	defer s.mu.Unlock()
	return append([][]byte(nil), s.seen...)
}

// jwt makes an unsigned JWT expiring at exp (the broker checks signatures;
// Berth only reads exp to know when to fetch a new token).
func jwt(sub string, exp time.Time) string {
	enc := base64.RawURLEncoding.EncodeToString
	claims, _ := json.Marshal(map[string]any{"sub": sub, "exp": exp.Unix()})
	return enc([]byte(`{"alg":"none"}`)) + "." + enc(claims) + "." + enc([]byte("sig"))
}

// bearer extracts the token from an OAUTHBEARER client first message
// (RFC 7628: "n,,\x01auth=Bearer TOKEN\x01...\x01\x01").
var bearerRE = regexp.MustCompile(`^n,[^,]*,\x01auth=Bearer ([^\x01]+)\x01((?:[^\x01]+\x01)*)\x01$`)

func TestOAuthBearerTokenFromFileEnvAndCommand(t *testing.T) {
	isolateConfig(t)
	good := jwt("berth-ops", time.Now().Add(time.Hour))
	kc, srv := startSASLServer(t, "OAUTHBEARER", func(auth []byte) (bool, []byte) {
		m := bearerRE.FindSubmatch(auth)
		return m != nil && string(m[1]) == good, nil
	})
	dir := t.TempDir()
	tokenFile := filepath.Join(dir, "token")
	os.WriteFile(tokenFile, []byte(good+"\n"), 0o600)
	t.Setenv("BERTH_TEST_OAUTH_TOKEN", good)
	for _, source := range []string{
		"token_file: " + tokenFile,
		"token_env: BERTH_TEST_OAUTH_TOKEN",
		"token_command: [cat, " + tokenFile + "]",
	} {
		cfg := writeConfig(t, fmt.Sprintf("contexts:\n  cloud:\n    bootstrap: [%s]\n    sasl:\n      mechanism: OAUTHBEARER\n      %s\n      extensions: {logicalCluster: lkc-123}\n", kc.Addrs[0], source))
		out, errOut, code := runBerth(t, "--config", cfg, "brokers", "-o", "json")
		if code != 0 || !strings.Contains(out, `"brokers"`) {
			t.Fatalf("%s: exit %d: %s", source, code, errOut)
		}
		if strings.Contains(out+errOut, good) {
			t.Fatalf("%s: the token was printed", source)
		}
	}
	msgs := srv.messages()
	if len(msgs) == 0 {
		t.Fatal("the broker saw no SaslAuthenticate")
	}
	for _, m := range msgs {
		sub := bearerRE.FindSubmatch(m)
		if sub == nil || string(sub[1]) != good || string(sub[2]) != "logicalCluster=lkc-123\x01" {
			t.Fatalf("OAUTHBEARER message %q: want the token and the extension", m)
		}
	}

	// A token the broker refuses: the error says authentication failed
	// and with which mechanism, and keeps the broker's reason.
	os.WriteFile(tokenFile, []byte(jwt("someone-else", time.Now().Add(time.Hour))), 0o600)
	cfg := writeConfig(t, fmt.Sprintf("contexts:\n  cloud:\n    bootstrap: [%s]\n    sasl: {mechanism: OAUTHBEARER, token_file: %s}\n", kc.Addrs[0], tokenFile))
	_, errOut, code := runBerth(t, "--config", cfg, "--timeout", "3s", "brokers")
	if code != 1 || !strings.Contains(errOut, "authentication failed (OAUTHBEARER)") || !strings.Contains(errOut, "invalid token") {
		t.Fatalf("refused token: exit %d, stderr %q", code, errOut)
	}
	// An expired token is not sent at all; the error names the setting.
	os.WriteFile(tokenFile, []byte(jwt("berth-ops", time.Now().Add(-time.Minute))), 0o600)
	_, errOut, code = runBerth(t, "--config", cfg, "brokers")
	if code != 1 || !strings.Contains(errOut, "contexts.cloud.sasl.token_file: the token expired") {
		t.Fatalf("expired token: exit %d, stderr %q", code, errOut)
	}
	// A failing command is named with its own first line of stderr.
	cmdCfg := writeConfig(t, fmt.Sprintf("contexts:\n  cloud:\n    bootstrap: [%s]\n    sasl: {mechanism: OAUTHBEARER, token_command: [sh, -c, 'echo no session >&2; exit 3']}\n", kc.Addrs[0]))
	_, errOut, code = runBerth(t, "--config", cmdCfg, "brokers")
	if code != 1 || !strings.Contains(errOut, "contexts.cloud.sasl.token_command: sh failed: exit status 3: no session") {
		t.Fatalf("failing token command: exit %d, stderr %q", code, errOut)
	}
}

// AWS_MSK_IAM: the payload is the signed JSON MSK expects, built from the
// AWS environment variables or a shared-credentials profile; the secret
// key never leaves the machine and is never printed.
func TestAWSMSKIAMSignsWithEnvironmentAndProfileCredentials(t *testing.T) {
	isolateConfig(t)
	for _, k := range []string{"AWS_ACCESS_KEY_ID", "AWS_SECRET_ACCESS_KEY", "AWS_SESSION_TOKEN", "AWS_PROFILE", "AWS_SHARED_CREDENTIALS_FILE", "AWS_REGION", "AWS_DEFAULT_REGION"} {
		t.Setenv(k, "")
		os.Unsetenv(k)
	}
	kc, srv := startSASLServer(t, "AWS_MSK_IAM", func(auth []byte) (bool, []byte) {
		return json.Valid(auth), []byte(`{"version":"2020_10_22","request-id":"test"}`)
	})
	t.Setenv("AWS_REGION", "eu-west-1")
	const secret = "wJalrXUtnFEMIK7MDENGbPxRfiCYEXAMPLEKEY"
	creds := filepath.Join(t.TempDir(), "credentials")
	os.WriteFile(creds, []byte("[default]\naws_access_key_id = AKIADEFAULT\naws_secret_access_key = other\n\n[msk]\naws_access_key_id = AKIAPROFILE\naws_secret_access_key = "+secret+"\n"), 0o600)

	base := fmt.Sprintf("contexts:\n  msk:\n    bootstrap: [%s]\n    sasl:\n      mechanism: AWS_MSK_IAM\n", kc.Addrs[0])
	t.Setenv("AWS_ACCESS_KEY_ID", "AKIAENVIRONMENT")
	t.Setenv("AWS_SECRET_ACCESS_KEY", secret)
	t.Setenv("AWS_SESSION_TOKEN", "session-token-1")
	t.Setenv("AWS_SHARED_CREDENTIALS_FILE", creds)
	for _, tc := range []struct{ extra, key, token string }{
		{"", "AKIAENVIRONMENT", "session-token-1"},
		{"      aws_profile: msk\n", "AKIAPROFILE", ""},
	} {
		out, errOut, code := runBerth(t, "--config", writeConfig(t, base+tc.extra), "brokers", "-o", "json")
		if code != 0 || strings.Contains(out+errOut, secret) {
			t.Fatalf("%q: exit %d (or the secret printed): %s", tc.extra, code, errOut)
		}
		msgs := srv.messages()
		var p map[string]string
		if err := json.Unmarshal(msgs[len(msgs)-1], &p); err != nil {
			t.Fatalf("payload is not JSON: %v", err)
		}
		if p["version"] != "2020_10_22" || p["action"] != "kafka-cluster:Connect" || p["host"] != "127.0.0.1" ||
			p["x-amz-algorithm"] != "AWS4-HMAC-SHA256" || !strings.HasPrefix(p["x-amz-credential"], tc.key+"/") ||
			!strings.Contains(p["x-amz-credential"], "/eu-west-1/kafka-cluster/aws4_request") ||
			!regexp.MustCompile(`^[0-9a-f]{64}$`).MatchString(p["x-amz-signature"]) || p["x-amz-security-token"] != tc.token {
			t.Fatalf("%q: MSK IAM payload %v", tc.extra, p)
		}
		if strings.Contains(string(msgs[len(msgs)-1]), secret) {
			t.Fatal("the secret key was sent")
		}
	}

	// No credentials anywhere: the error says where it looked.
	t.Setenv("AWS_ACCESS_KEY_ID", "")
	t.Setenv("AWS_SECRET_ACCESS_KEY", "")
	_, errOut, code := runBerth(t, "--config", writeConfig(t, base+"      aws_profile: missing\n"), "brokers")
	if code != 1 || !strings.Contains(errOut, `contexts.msk.sasl.aws_profile: profile "missing" is not in `+creds) {
		t.Fatalf("missing profile: exit %d, stderr %q", code, errOut)
	}
}

// The config names the field a SASL setup lacks before anything is dialled.
func TestSASLConfigErrorsNameTheField(t *testing.T) {
	isolateConfig(t)
	empty := filepath.Join(t.TempDir(), "empty")
	os.WriteFile(empty, []byte("\n"), 0o600)
	for _, tc := range []struct{ sasl, want string }{
		{"{mechanism: SCRAM-SHA-256, username: admin}", "contexts.s.sasl.password_env: SCRAM-SHA-256 needs a password: set sasl.password_env or sasl.password_file"},
		{"{mechanism: PLAIN, username: admin, password_file: " + empty + "}", "contexts.s.sasl.password_file: the password is empty"},
		{"{mechanism: OAUTHBEARER}", "contexts.s.sasl.token_file: OAUTHBEARER needs exactly one of"},
		{"{mechanism: OAUTHBEARER, token_env: A, token_file: b}", "contexts.s.sasl.token_file: OAUTHBEARER needs exactly one of"},
		{"{mechanism: SCRAM-SHA-512, username: u, password_env: X, token_env: T}", "contexts.s.sasl.token_file: token and extensions fields go with OAUTHBEARER"},
		{"{mechanism: GSSAPI}", `contexts.s.sasl.mechanism: "GSSAPI" is not one of PLAIN, SCRAM-SHA-256, SCRAM-SHA-512, OAUTHBEARER, AWS_MSK_IAM`},
	} {
		cfg := writeConfig(t, "contexts:\n  s:\n    bootstrap: [127.0.0.1:1]\n    sasl: "+tc.sasl+"\n")
		_, errOut, code := runBerth(t, "--config", cfg, "--timeout", "1s", "brokers")
		if code == 0 || !strings.Contains(errOut, tc.want) || strings.Contains(errOut, "127.0.0.1:1") {
			t.Errorf("%s: exit %d, stderr %q; want %q before any dial", tc.sasl, code, errOut, tc.want)
		}
	}
}

// PLAIN over plaintext works (a local test cluster) but says on stderr
// that the password travels in clear; over TLS it says nothing.
func TestSASLPlainWithoutTLSWarns(t *testing.T) {
	isolateConfig(t)
	t.Setenv("BERTH_TEST_PLAIN_PW", "pl41n-s3cret")
	kc := kafkatest.Start(t, 1, kfake.EnableSASL(), kfake.Superuser("PLAIN", "ops", "pl41n-s3cret"))
	cfg := writeConfig(t, "contexts:\n  p:\n    bootstrap: ["+kc.Addrs[0]+"]\n    sasl: {mechanism: PLAIN, username: ops, password_env: BERTH_TEST_PLAIN_PW}\n")
	out, errOut, code := runBerth(t, "--config", cfg, "brokers", "-o", "json")
	if code != 0 || !strings.Contains(out, `"brokers"`) {
		t.Fatalf("exit %d: %s", code, errOut)
	}
	if strings.Count(errOut, "\n") != 1 || !strings.Contains(errOut, "berth: warning: context p sends its SASL PLAIN password unencrypted (no tls)") {
		t.Fatalf("want one warning line, got %q", errOut)
	}

	caPEM, serverCert := selfSignedTLS(t)
	tlsKC := kafkatest.Start(t, 1, kfake.EnableSASL(), kfake.Superuser("PLAIN", "ops", "pl41n-s3cret"), kfake.TLS(&tls.Config{Certificates: []tls.Certificate{serverCert}}))
	ca := filepath.Join(t.TempDir(), "ca.pem")
	os.WriteFile(ca, caPEM, 0o600)
	cfg = writeConfig(t, "contexts:\n  p:\n    bootstrap: ["+tlsKC.Addrs[0]+"]\n    tls: {ca_file: "+ca+"}\n    sasl: {mechanism: PLAIN, username: ops, password_env: BERTH_TEST_PLAIN_PW}\n")
	if _, errOut, code := runBerth(t, "--config", cfg, "brokers", "-o", "json"); code != 0 || errOut != "" {
		t.Fatalf("PLAIN over TLS: exit %d, stderr %q (want none)", code, errOut)
	}
}

// tls.server_name: a certificate for the cluster's real name is accepted
// when dialling an IP address (a port-forward); mutual TLS presents the
// client certificate, and a server that demands one refuses a client
// without it with an error naming the address.
func TestTLSServerNameAndMutualTLS(t *testing.T) {
	isolateConfig(t)
	ca, caKey, caPEM := testCA(t)
	serverCert := leafCert(t, ca, caKey, "kafka.internal", x509.ExtKeyUsageServerAuth)
	clientCert := leafCert(t, ca, caKey, "berth-client", x509.ExtKeyUsageClientAuth)
	pool := x509.NewCertPool()
	pool.AddCert(ca)
	kc := kafkatest.Start(t, 1, kfake.TLS(&tls.Config{Certificates: []tls.Certificate{serverCert}, ClientAuth: tls.RequireAndVerifyClientCert, ClientCAs: pool}))
	dir := t.TempDir()
	caFile, certFile, keyFile := filepath.Join(dir, "ca.pem"), filepath.Join(dir, "client.pem"), filepath.Join(dir, "client.key")
	os.WriteFile(caFile, caPEM, 0o600)
	writeKeyPair(t, clientCert, certFile, keyFile)

	ctx := func(tlsBlock string) string {
		return writeConfig(t, "contexts:\n  m:\n    bootstrap: ["+kc.Addrs[0]+"]\n    tls:\n"+tlsBlock)
	}
	full := fmt.Sprintf("      ca_file: %s\n      cert_file: %s\n      key_file: %s\n", caFile, certFile, keyFile)
	if _, errOut, code := runBerth(t, "--config", ctx(full+"      server_name: kafka.internal\n"), "brokers", "-o", "json"); code != 0 {
		t.Fatalf("mTLS with server_name: exit %d: %s", code, errOut)
	}
	_, errOut, code := runBerth(t, "--config", ctx(full), "--timeout", "2s", "brokers")
	if code != 1 || !strings.Contains(errOut, kc.Addrs[0]) || !strings.Contains(errOut, "certificate is for kafka.internal") || !strings.Contains(errOut, "tls.server_name") {
		t.Fatalf("without server_name the certificate (for kafka.internal) must not match 127.0.0.1: exit %d, stderr %q", code, errOut)
	}
	noCert := fmt.Sprintf("      ca_file: %s\n      server_name: kafka.internal\n", caFile)
	_, errOut, code = runBerth(t, "--config", ctx(noCert), "--timeout", "2s", "brokers")
	if code != 1 || !strings.Contains(errOut, kc.Addrs[0]) {
		t.Fatalf("without a client certificate: exit %d, stderr %q", code, errOut)
	}
}

func testCA(t *testing.T) (*x509.Certificate, *ecdsa.PrivateKey, []byte) {
	t.Helper()
	key, _ := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	tmpl := &x509.Certificate{
		SerialNumber: big.NewInt(10), Subject: pkix.Name{CommonName: "berth auth test CA"},
		NotBefore: time.Now().Add(-time.Hour), NotAfter: time.Now().Add(time.Hour),
		IsCA: true, BasicConstraintsValid: true, KeyUsage: x509.KeyUsageCertSign,
	}
	der, err := x509.CreateCertificate(rand.Reader, tmpl, tmpl, &key.PublicKey, key)
	if err != nil {
		t.Fatal(err)
	}
	cert, _ := x509.ParseCertificate(der)
	return cert, key, pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: der})
}

func leafCert(t *testing.T, ca *x509.Certificate, caKey *ecdsa.PrivateKey, name string, usage x509.ExtKeyUsage) tls.Certificate {
	t.Helper()
	key, _ := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	serial, _ := rand.Int(rand.Reader, big.NewInt(1<<62))
	tmpl := &x509.Certificate{
		SerialNumber: serial, Subject: pkix.Name{CommonName: name}, DNSNames: []string{name},
		NotBefore: time.Now().Add(-time.Hour), NotAfter: time.Now().Add(time.Hour),
		KeyUsage: x509.KeyUsageDigitalSignature, ExtKeyUsage: []x509.ExtKeyUsage{usage},
	}
	der, err := x509.CreateCertificate(rand.Reader, tmpl, ca, &key.PublicKey, caKey)
	if err != nil {
		t.Fatal(err)
	}
	return tls.Certificate{Certificate: [][]byte{der}, PrivateKey: key}
}

func writeKeyPair(t *testing.T, c tls.Certificate, certFile, keyFile string) {
	t.Helper()
	keyDER, err := x509.MarshalECPrivateKey(c.PrivateKey.(*ecdsa.PrivateKey))
	if err != nil {
		t.Fatal(err)
	}
	os.WriteFile(certFile, pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: c.Certificate[0]}), 0o600)
	os.WriteFile(keyFile, pem.EncodeToMemory(&pem.Block{Type: "EC PRIVATE KEY", Bytes: keyDER}), 0o600)
}

// A port that speaks another protocol is named as such, not as "invalid
// large response size 1095586128": RabbitMQ answers a Kafka request with
// "AMQP" and its protocol header.
func TestBootstrapToANonKafkaPortSaysSo(t *testing.T) {
	isolateConfig(t)
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { ln.Close() })
	go func() {
		for {
			c, err := ln.Accept()
			if err != nil {
				return
			}
			go func() {
				defer c.Close()
				buf := make([]byte, 64)
				c.Read(buf)
				c.Write([]byte("AMQP\x00\x00\x09\x01"))
			}()
		}
	}()
	_, errOut, code := runBerth(t, "--bootstrap", ln.Addr().String(), "--timeout", "2s", "brokers")
	if code != 1 || !strings.Contains(errOut, `the server answered "AMQP", not Kafka`) {
		t.Fatalf("exit %d, stderr %q", code, errOut)
	}
}
