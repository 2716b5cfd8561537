package manifest

import (
	"errors"
	"strings"
	"testing"
)

func TestKeys(t *testing.T) {
	h := PartitionHash("orders.v1", 3)
	if len(h) != 8 || !isLowerHex(h) {
		t.Fatalf("PartitionHash = %q", h)
	}
	if PartitionHash("orders.v1", 4) == h {
		t.Fatal("hash ignores the partition")
	}
	keys, err := DataKeys("/tiered/prod/", "orders.v1", 3, 12345, "0123456789abcdef0123456789abcdef")
	if err != nil {
		t.Fatal(err)
	}
	stem := "tiered/prod/data/" + h + "/orders.v1-3/00000000000000012345-0123456789abcdef0123456789abcdef."
	want := SegmentKeys{Log: stem + "log", Index: stem + "index", TimeIndex: stem + "timeindex", TxnIndex: stem + "txnindex", Indexes: stem + "indexes"}
	if keys != want {
		t.Fatalf("DataKeys = %+v, want %+v", keys, want)
	}
	mk, err := ManifestKey("", "orders.v1", 3)
	if err != nil || mk != "manifests/"+h+"/orders.v1-3/manifest.json" {
		t.Fatalf("ManifestKey = %q, %v", mk, err)
	}
	for f, key := range map[FileType]string{FileLog: keys.Log, FileIndex: keys.Index, FileTimeIndex: keys.TimeIndex, FileTxnIndex: keys.TxnIndex, FileIndexes: keys.Indexes} {
		k, err := ParseDataKey(key)
		if err != nil {
			t.Fatal(err)
		}
		want := Key{Type: KeyData, Prefix: "tiered/prod", Topic: "orders.v1", Partition: 3, BaseOffset: 12345,
			AttemptID: "0123456789abcdef0123456789abcdef", File: f}
		if k != want {
			t.Errorf("ParseDataKey(%q) = %+v, want %+v", key, k, want)
		}
	}
	k, err := ParseKey(mk)
	if err != nil || k != (Key{Type: KeyRoot, Topic: "orders.v1", Partition: 3}) {
		t.Fatalf("ParseKey(%q) = %+v, %v", mk, k, err)
	}
	if _, err := ParseDataKey(mk); err == nil {
		t.Fatal("ParseDataKey accepted a manifest key")
	}
	// A topic with dashes splits at the last one.
	k, err = ParseKey("data/" + PartitionHash("a-b-7", 10) + "/a-b-7-10/" + offsetName(0) + "-abcdefgh.log")
	if err != nil || k.Topic != "a-b-7" || k.Partition != 10 {
		t.Fatalf("dashed topic: %+v, %v", k, err)
	}
	var sum [32]byte
	sum[0] = 0xab
	sk, err := subKey("p", "t", "", 0, 5, 99, sum)
	if err != nil {
		t.Fatal(err)
	}
	k, err = ParseKey(sk)
	if err != nil || k != (Key{Type: KeySub, Prefix: "p", Topic: "t", BaseOffset: 5, LastOffset: 99, SumPrefix: "ab00000000000000"}) {
		t.Fatalf("ParseKey(%q) = %+v, %v", sk, k, err)
	}
}

func TestParseKeyForeign(t *testing.T) {
	h := PartitionHash("foo", 0)
	a := "-0123456789abcdef"
	good := "data/" + h + "/foo-0/" + offsetName(7) + a + ".log"
	if _, err := ParseKey(good); err != nil {
		t.Fatal(err)
	}
	bad := map[string]string{
		"empty":            "",
		"random":           "backups/2024/foo.tar",
		"wrong_hash":       "data/00000000/foo-0/" + offsetName(7) + a + ".log",
		"other_partition":  "data/" + h + "/foo-1/" + offsetName(7) + a + ".log",
		"no_partition":     "data/" + h + "/foo/" + offsetName(7) + a + ".log",
		"partition_zero":   "data/" + PartitionHash("foo", 1) + "/foo-01/" + offsetName(7) + a + ".log",
		"partition_sign":   "data/" + PartitionHash("foo", 1) + "/foo-+1/" + offsetName(7) + a + ".log",
		"bad_topic":        "data/" + PartitionHash("f o", 0) + "/f o-0/" + offsetName(7) + a + ".log",
		"bad_ext":          "data/" + h + "/foo-0/" + offsetName(7) + a + ".snapshot",
		"no_ext":           "data/" + h + "/foo-0/" + offsetName(7) + a,
		"short_base":       "data/" + h + "/foo-0/7" + a + ".log",
		"base_overflow":    "data/" + h + "/foo-0/99999999999999999999" + a + ".log",
		"bad_attempt":      "data/" + h + "/foo-0/" + offsetName(7) + "-ABCDEFGHIJ.log",
		"short_attempt":    "data/" + h + "/foo-0/" + offsetName(7) + "-abc.log",
		"dotdot_prefix":    "../data/" + h + "/foo-0/" + offsetName(7) + a + ".log",
		"empty_prefix_el":  "a//data/" + h + "/foo-0/" + offsetName(7) + a + ".log",
		"leading_slash":    "/data/" + h + "/foo-0/" + offsetName(7) + a + ".log",
		"sub_bad_name":     "manifests/" + h + "/foo-0/sub/x.json",
		"sub_base_gt_last": "manifests/" + h + "/foo-0/sub/" + offsetName(9) + "-" + offsetName(8) + "-0123456789abcdef.json",
		"sub_upper_hex":    "manifests/" + h + "/foo-0/sub/" + offsetName(1) + "-" + offsetName(8) + "-0123456789ABCDEF.json",
		"root_wrong_name":  "manifests/" + h + "/foo-0/manifest.yaml",
	}
	for name, key := range bad {
		t.Run(name, func(t *testing.T) {
			_, err := ParseKey(key)
			var ke *KeyError
			if !errors.As(err, &ke) || ke.Key != key {
				t.Fatalf("ParseKey(%q) = %v, want *KeyError", key, err)
			}
		})
	}
}

func TestValidateTopic(t *testing.T) {
	for _, ok := range []string{"foo", "a.b_c-1", "__consumer_offsets", "-", "...", strings.Repeat("a", 249)} {
		if err := ValidateTopic(ok); err != nil {
			t.Errorf("ValidateTopic(%q) = %v", ok, err)
		}
	}
	for _, bad := range []string{"", ".", "..", "a/b", "a b", "é", strings.Repeat("a", 250), "a\x00"} {
		if err := ValidateTopic(bad); err == nil {
			t.Errorf("ValidateTopic(%q) accepted", bad)
		}
	}
	if _, err := DataKeys("", "a/b", 0, 0, NewAttemptID()); err == nil {
		t.Error("DataKeys accepted topic a/b")
	}
	if _, err := DataKeys("", "a", -1, 0, NewAttemptID()); err == nil {
		t.Error("DataKeys accepted partition -1")
	}
	if _, err := DataKeys("", "a", 0, -1, NewAttemptID()); err == nil {
		t.Error("DataKeys accepted base offset -1")
	}
	if _, err := DataKeys("x/../y", "a", 0, 0, NewAttemptID()); err == nil {
		t.Error("DataKeys accepted prefix x/../y")
	}
}

func TestNewAttemptID(t *testing.T) {
	a, b := NewAttemptID(), NewAttemptID()
	if a == b || len(a) != 32 || validateAttemptID(a) != nil {
		t.Fatalf("NewAttemptID: %q, %q", a, b)
	}
}

func TestChecksum(t *testing.T) {
	c, err := ChecksumOf(CRC32C, []byte("123456789"))
	if err != nil || c != "crc32c:e3069283" { // the CRC-32C check value
		t.Fatalf("crc32c = %q, %v", c, err)
	}
	if v, ok := c.CRC32CValue(); !ok || v != 0xe3069283 || CRC32CChecksum(v) != c {
		t.Fatalf("CRC32CValue = %x, %v", v, ok)
	}
	c, err = ChecksumOf(SHA256, []byte("abc"))
	if err != nil || c != "sha256:ba7816bf8f01cfea414140de5dae2223b00361a396177a9cb410ff61f20015ad" {
		t.Fatalf("sha256 = %q, %v", c, err)
	}
	d, _ := NewDigest(SHA256)
	d.Write([]byte("a"))
	d.Write([]byte("bc"))
	if d.Checksum() != c {
		t.Fatal("streaming digest differs")
	}
	if _, err := NewDigest("md5"); err == nil {
		t.Fatal("NewDigest accepted md5")
	}
	for _, bad := range []Checksum{"", "crc32c", "crc32c:", "crc32c:E3069283", "crc32c:e306928", "md5:e3069283",
		"sha256:ba7816bf", "crc32c:e3069283 ", "crc32c:zz069283"} {
		if bad.Validate() == nil {
			t.Errorf("Checksum(%q).Validate accepted", bad)
		}
	}
}
