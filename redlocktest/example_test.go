package redlocktest_test

import (
	"fmt"
	"log"
	"testing"
	"time"

	"github.com/gomodule/redigo/redis"

	"github.com/redlock-go/redlock/redlocktest"
)

// In a test, Start launches the nodes, fails the test when it cannot, and
// stops them when the test ends.
func ExampleStart() {
	var t *testing.T // the *testing.T of your test

	c := redlocktest.Start(t, 3)
	conn, err := redis.DialURL(c.URLs()[1])
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close()

	if err := c.Kill(1); err != nil { // node 1 dies: conn now fails
		t.Fatal(err)
	}
	if err := c.Restart(1); err != nil { // back, empty, same URL
		t.Fatal(err)
	}
}

// Outside tests, Launch starts the nodes and Close stops them.
func Example() {
	c, err := redlocktest.Launch(3)
	if err != nil {
		log.Fatal(err)
	}
	defer c.Close()

	conn, err := redis.DialURL(c.URLs()[0], redis.DialReadTimeout(time.Second))
	if err != nil {
		log.Fatal(err)
	}
	defer conn.Close()
	if _, err := conn.Do("SET", "greeting", "hello"); err != nil {
		log.Fatal(err)
	}
	v, _ := redis.String(c.Do(0, "GET", "greeting"))
	fmt.Println("before kill:", v)

	if err := c.Kill(0); err != nil {
		log.Fatal(err)
	}
	_, err = conn.Do("GET", "greeting")
	fmt.Println("killed node answers:", err == nil)

	if err := c.Restart(0); err != nil {
		log.Fatal(err)
	}
	n, _ := redis.Int(c.Do(0, "EXISTS", "greeting"))
	fmt.Println("keys after restart:", n)
	// Output:
	// before kill: hello
	// killed node answers: false
	// keys after restart: 0
}
