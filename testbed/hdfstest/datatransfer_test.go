package hdfstest

import (
	"bytes"
	"io"
	"testing"

	"github.com/colinmarc/hdfs/v2"
	"github.com/colinmarc/hdfs/v2/hadoopconf"
)

// TestThirdPartyDataTransferProtection: colinmarc/hdfs, unchanged, with
// its own data-transfer SASL and the written configuration, writes and
// reads files of several blocks on datanodes that require the handshake:
// at authentication, and at privacy with AES-CTR after it (the datanode
// sends keys inside the DIGEST-MD5 layer, which colinmarc unwraps). A
// client without the setting is cut off.
func TestThirdPartyDataTransferProtection(t *testing.T) {
	for _, tc := range []struct{ name, protection, suites string }{
		{"authentication", "authentication", ""},
		{"privacy with AES", "privacy", "AES/CTR/NoPadding"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			c := testCluster(t, Config{DataTransferProtection: tc.protection, DataTransferCipherSuites: tc.suites})
			dir := t.TempDir()
			if err := c.WriteConfig(dir); err != nil {
				t.Fatal(err)
			}
			conf, err := hadoopconf.Load(dir)
			if err != nil {
				t.Fatal(err)
			}
			opts := hdfs.ClientOptionsFromConf(conf)
			opts.User = c.Superuser()
			cl, err := hdfs.NewClient(opts)
			if err != nil {
				t.Fatal(err)
			}
			defer cl.Close()
			data := randomBytes(3*testBlockSize+1234, 9)
			writeFile(t, cl, "/protected.bin", data)
			f, err := cl.Open("/protected.bin")
			if err != nil {
				t.Fatal(err)
			}
			got, err := io.ReadAll(f)
			f.Close()
			if err != nil || !bytes.Equal(got, data) {
				t.Fatalf("read back %d bytes of %d: %v", len(got), len(data), err)
			}
			if st := c.Stats(); st.Handshakes == 0 || st.HandshakesRefused != 0 {
				t.Fatalf("%d handshakes, %d refused", st.Handshakes, st.HandshakesRefused)
			}

			plain := connect(t, c, c.Superuser())
			if f, err := plain.Open("/protected.bin"); err == nil {
				if _, err := io.ReadAll(f); err == nil {
					t.Fatal("read without the handshake")
				}
				f.Close()
			}
		})
	}
}
