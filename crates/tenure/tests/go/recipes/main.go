// A client of etcd's clientv3/concurrency recipes, built offline from
// Debian's golang-etcd-server-dev (etcd 3.4) by crates/tenure/tests/serial/etcd_go.rs:
// it takes an Election or a Mutex ROUNDS times, holds it HOLD_MS each time,
// and prints one line per hold for the test to check:
//
//	HOLD <start unix ns> <end unix ns> <revision of its key>
//
// then DONE. In stm mode it instead increments the counter key NAME
// ROUNDS times, each in a software transaction (concurrency.NewSTM, its
// default serializable-snapshot isolation), printing the value it wrote:
//
//	INCR <value> <times the transaction ran: more than 1 after a conflict>
//
// A call that fails (the node it talks to was killed, no leader
// for a moment) is retried, as an application would; the session's lease
// running out ends the program with an error, since whatever it held may
// then be held by another.
//
// Usage: recipes elect|lock|stm NAME ROUNDS HOLD_MS ENDPOINTS CACERT CERT KEY
package main

import (
	"context"
	"crypto/tls"
	"crypto/x509"
	"fmt"
	"io/ioutil"
	"os"
	"strconv"
	"strings"
	"time"

	"go.etcd.io/etcd/clientv3"
	"go.etcd.io/etcd/clientv3/concurrency"
)

// How long one call may take before it is tried again.
const callTimeout = 5 * time.Second

// How many times in a row a call may fail before the program gives up.
const maxAttempts = 20

func fail(format string, args ...interface{}) {
	fmt.Printf("ERROR "+format+"\n", args...)
	os.Exit(1)
}

// retry runs call until it succeeds, at most maxAttempts times.
func retry(what string, call func(ctx context.Context) error) {
	for attempt := 1; ; attempt++ {
		ctx, cancel := context.WithTimeout(context.Background(), callTimeout)
		err := call(ctx)
		cancel()
		if err == nil {
			return
		}
		if attempt >= maxAttempts {
			fail("%s: %v (after %d attempts)", what, err, attempt)
		}
		fmt.Printf("RETRY %d %s: %v\n", time.Now().UnixNano(), what, err)
		time.Sleep(200 * time.Millisecond)
	}
}

func main() {
	fmt.Printf("START %d\n", time.Now().UnixNano())
	if len(os.Args) != 9 {
		fail("usage: recipes elect|lock|stm NAME ROUNDS HOLD_MS ENDPOINTS CACERT CERT KEY")
	}
	mode, name := os.Args[1], os.Args[2]
	rounds, err := strconv.Atoi(os.Args[3])
	if err != nil {
		fail("ROUNDS: %v", err)
	}
	holdMs, err := strconv.Atoi(os.Args[4])
	if err != nil {
		fail("HOLD_MS: %v", err)
	}
	cert, err := tls.LoadX509KeyPair(os.Args[7], os.Args[8])
	if err != nil {
		fail("client certificate: %v", err)
	}
	ca, err := ioutil.ReadFile(os.Args[6])
	if err != nil {
		fail("CA: %v", err)
	}
	pool := x509.NewCertPool()
	pool.AppendCertsFromPEM(ca)
	cli, err := clientv3.New(clientv3.Config{
		Endpoints:   strings.Split(os.Args[5], ","),
		DialTimeout: 5 * time.Second,
		TLS:         &tls.Config{Certificates: []tls.Certificate{cert}, RootCAs: pool},
	})
	if err != nil {
		fail("connect: %v", err)
	}
	defer cli.Close()
	var session *concurrency.Session
	retry("session", func(ctx context.Context) error {
		s, err := concurrency.NewSession(cli, concurrency.WithTTL(10), concurrency.WithContext(context.Background()))
		session = s
		return err
	})
	me := fmt.Sprintf("%x", session.Lease())
	fmt.Printf("SESSION %d %s\n", time.Now().UnixNano(), me)
	for round := 0; round < rounds; round++ {
		var start time.Time
		var rev int64
		var release func(ctx context.Context) error
		switch mode {
		case "stm":
			// A failed commit is retried by NewSTM itself (a conflict);
			// an error here is a call that failed, tried again.
			var wrote, runs int
			retry("stm", func(ctx context.Context) error {
				_, err := concurrency.NewSTM(cli, func(s concurrency.STM) error {
					runs++
					n := 0
					if v := s.Get(name); v != "" {
						if n, err = strconv.Atoi(v); err != nil {
							return err
						}
					}
					wrote = n + 1
					s.Put(name, strconv.Itoa(wrote))
					return nil
				}, concurrency.WithAbortContext(ctx))
				return err
			})
			fmt.Printf("INCR %d %d\n", wrote, runs)
			continue
		case "elect":
			e := concurrency.NewElection(session, name)
			retry("campaign", func(ctx context.Context) error { return e.Campaign(ctx, me) })
			start, rev, release = time.Now(), e.Rev(), e.Resign
		case "lock":
			m := concurrency.NewMutex(session, name)
			retry("lock", func(ctx context.Context) error { return m.Lock(ctx) })
			start, release = time.Now(), m.Unlock
			// The fencing token: the lock key's create revision.
			retry("read the lock key", func(ctx context.Context) error {
				resp, err := cli.Get(ctx, m.Key())
				if err == nil && len(resp.Kvs) == 1 {
					rev = resp.Kvs[0].CreateRevision
				} else if err == nil {
					err = fmt.Errorf("the lock key %q is gone", m.Key())
				}
				return err
			})
		default:
			fail("unknown mode %q", mode)
		}
		select {
		case <-session.Done():
			fail("the session's lease ended while holding")
		case <-time.After(time.Duration(holdMs) * time.Millisecond):
		}
		end := time.Now()
		fmt.Printf("HOLD %d %d %d\n", start.UnixNano(), end.UnixNano(), rev)
		retry("release", release)
	}
	fmt.Println("DONE")
}
