package cypherturn.testing;

import org.neo4j.procedure.Description;
import org.neo4j.procedure.Name;
import org.neo4j.procedure.UserFunction;

/**
 * TEST ONLY (see tests/jvm/pom.xml): a computation Neo4j cannot end by termination. Like a query stuck in
 * one expression, it never checks whether its transaction was terminated, so the server's watchdog
 * (graphs/jvm/.../Watchdog.java) must stop its thread or halt the JVM; the tests use it to reach that
 * path every time. It must never be loaded into a server that runs other people's queries.
 */
public final class Spin {
    @UserFunction("cypherturn.testing.spin")
    @Description("Busy-waits for the given milliseconds without checking for termination; returns them.")
    public long spin(@Name("millis") long millis) {
        long end = System.nanoTime() + millis * 1_000_000L;
        long spins = 0;
        while (System.nanoTime() < end) {
            spins++;  // no sleep, no termination check: the thread is busy the whole time
        }
        return spins >= 0 ? millis : -1;
    }

    /**
     * A computation even Thread.stop does not end (it swallows ThreadDeath, as code stuck in a catch-all
     * would): on Java 17 the watchdog stops its thread, sees it still computing a grace period later and
     * halts the JVM, its last resort.
     */
    @UserFunction("cypherturn.testing.unstoppable")
    @Description("Busy-waits for the given milliseconds, ignoring termination and Thread.stop; returns them.")
    @SuppressWarnings({"deprecation", "removal"})
    public long unstoppable(@Name("millis") long millis) {
        long end = System.nanoTime() + millis * 1_000_000L;
        while (true) {
            try {
                while (System.nanoTime() < end) {
                    Thread.onSpinWait();
                }
                return millis;
            } catch (ThreadDeath stopped) {
                // swallowed: back to spinning
            }
        }
    }

    /** A query that is slow but idle (it holds no core): another session's query in flight during a halt. */
    @UserFunction("cypherturn.testing.sleep")
    @Description("Sleeps for the given milliseconds without checking for termination; returns them.")
    public long sleep(@Name("millis") long millis) throws InterruptedException {
        Thread.sleep(millis);
        return millis;
    }
}
