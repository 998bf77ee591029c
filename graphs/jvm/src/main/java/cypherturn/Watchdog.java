package cypherturn;

import java.io.IOException;
import java.lang.management.ManagementFactory;
import java.lang.management.MemoryPoolMXBean;
import java.lang.management.MemoryType;
import java.nio.charset.StandardCharsets;
import java.nio.file.Files;
import java.nio.file.Path;
import java.nio.file.StandardCopyOption;
import java.util.HashMap;
import java.util.HashSet;
import java.util.Map;
import java.util.Optional;
import java.util.Set;
import java.util.concurrent.TimeUnit;

import org.neo4j.dbms.api.DatabaseManagementService;
import org.neo4j.kernel.api.KernelTransactionHandle;
import org.neo4j.kernel.api.exceptions.Status;
import org.neo4j.kernel.api.net.NetworkConnectionTracker;
import org.neo4j.kernel.api.net.TrackedNetworkConnection;
import org.neo4j.kernel.api.query.ExecutingQuery;
import org.neo4j.kernel.impl.api.KernelTransactions;
import org.neo4j.kernel.internal.GraphDatabaseAPI;

/**
 * Ends any transaction that outlives its time limit or threatens the heap, because Neo4j's own
 * termination is cooperative: a query stuck inside one expression (a reduce() building a string, a list
 * comprehension over range(), the parser or planner on a pathological query) never checks it.
 *
 * Each tick, for every world's database:
 *  1. a transaction running past its timeout + grace is marked for termination (Neo4j's own way out);
 *  2. one still open a grace period after that has its client connection closed and, when the thread
 *     executing its query is inside Cypher evaluation, that thread stopped;
 *  3. one whose stopped thread still computes a grace period after that (or whose unstoppable thread
 *     still runs DRAIN_GRACES grace periods after that) halts the JVM with code 75, so that the next
 *     client restarts the server on the same ports with the same stores (graphs/server.py).
 * A thread is never stopped while it sends a result (Bolt, Netty, NIO) or frees memory: a ThreadDeath
 * delivered inside the JDK's Cleaner makes it call System.exit(1) from that thread, whose shutdown hook
 * then waits for the very same thread to leave its connection: a server hung with its ports closed.
 * Closing the connection ends such a thread once it has written its value (bounded by the value's size).
 * A stopped or unstoppable thread is acted on again only while it still runs that transaction's query:
 * a Bolt worker freed by the closed connection serves other clients, whose results a stray ThreadDeath
 * would cut in the middle of a message.
 * The last resort is Runtime.halt, not System.exit, for the same reason: no shutdown hook can wait for a
 * stuck worker; the stores are only read at query time, so nothing is lost. Before halting it writes the
 * halt record (JSON: world, query text, kind "timeout" or "memory", reason, time, pid) so that the client
 * whose query caused the restart reports it as that query's error instead of retrying it (graphs/executor.py).
 * With stopThreads false it never stops a thread and halts where it would have (what Java 20+, which
 * cannot stop threads, forces; tests/test_server_halt_attribution.py uses it, with a test-only function
 * that never checks for termination, to reach the halt path every time on a private server).
 * When the old generation of the heap is fuller than the configured fraction, the query whose thread
 * allocated the most since the last tick is terminated and stopped the same way, before the JVM runs out
 * of memory (which would take every world down).
 * Every action is printed to the server log as a line starting with "WATCHDOG".
 */
final class Watchdog implements Runnable {
    static final int EXIT_STUCK = 75;
    private static final long MIN_HUNGRY_BYTES = 16L << 20; // a query allocating less than this per tick is not the cause
    private static final int DRAIN_GRACES = 12; // an unstoppable thread sending a result gets this many graces
    /** Code where an asynchronous ThreadDeath is unsafe: result sending, buffers, the JDK's cleaners. */
    private static final String[] UNSAFE_TO_STOP = {"io.netty.", "org.neo4j.bolt.", "org.neo4j.packstream.",
            "java.nio.", "sun.nio.", "jdk.internal.ref.", "jdk.internal.misc.", "sun.misc.", "java.lang.ref."};

    private final Map<String, DatabaseManagementService> services;
    private final long graceNanos;
    private final long intervalMillis;
    private final double heapFraction;
    private final MemoryPoolMXBean oldGen;
    private final Path haltRecord;
    private final boolean stopThreads;
    private final com.sun.management.ThreadMXBean threads =
            (com.sun.management.ThreadMXBean) ManagementFactory.getThreadMXBean();
    private final Map<KernelTransactionHandle, Long> terminatedAt = new HashMap<>();
    private final Map<KernelTransactionHandle, Long> stoppedAt = new HashMap<>();
    private final Map<KernelTransactionHandle, Thread> stoppedThread = new HashMap<>();
    private final Set<KernelTransactionHandle> unstoppable = new HashSet<>();
    private final Set<KernelTransactionHandle> hungry = new HashSet<>(); // acted on for memory, not time
    private final Map<Long, Long> allocatedBefore = new HashMap<>();

    Watchdog(Map<String, DatabaseManagementService> services, long graceMillis, long intervalMillis,
             double heapFraction, Path haltRecord, boolean stopThreads) {
        this.services = services;
        this.haltRecord = haltRecord;
        this.stopThreads = stopThreads;
        this.graceNanos = TimeUnit.MILLISECONDS.toNanos(graceMillis);
        this.intervalMillis = intervalMillis;
        this.heapFraction = heapFraction;
        MemoryPoolMXBean old = null;
        for (MemoryPoolMXBean pool : ManagementFactory.getMemoryPoolMXBeans()) {
            if (pool.getType() == MemoryType.HEAP && pool.getName().contains("Old Gen")) {
                old = pool;
            }
        }
        this.oldGen = old;
    }

    @Override
    public void run() {
        while (true) {
            try {
                Thread.sleep(intervalMillis);
                tick();
            } catch (InterruptedException e) {
                return;
            } catch (RuntimeException | OutOfMemoryError e) {
                // a database shutting down or starting, or a heap that a query filled: try again next tick
            }
        }
    }

    @SuppressWarnings({"deprecation", "removal"})
    private void tick() {
        long now = System.nanoTime();
        Set<KernelTransactionHandle> seen = new HashSet<>();
        KernelTransactionHandle hungriest = null;
        String hungriestWorld = null;
        GraphDatabaseAPI hungriestDb = null;
        long hungriestBytes = -1;
        Map<Long, Long> allocatedNow = new HashMap<>();
        // cheap checks first: thread lookups pause the JVM, so they happen only when something is wrong
        long maxHeap = Runtime.getRuntime().maxMemory();
        boolean heapHigh = oldGen != null && oldGen.getUsage().getUsed() > heapFraction * maxHeap;
        Map<String, DatabaseManagementService> snapshot;
        synchronized (services) {
            snapshot = new HashMap<>(services);
        }
        for (Map.Entry<String, DatabaseManagementService> e : snapshot.entrySet()) {
            String world = e.getKey();
            GraphDatabaseAPI db = (GraphDatabaseAPI) e.getValue().database("neo4j");
            if (!db.isAvailable(0)) {
                continue;
            }
            KernelTransactions kt = db.getDependencyResolver().resolveDependency(KernelTransactions.class);
            for (KernelTransactionHandle tx : kt.activeTransactions()) {
                if (!tx.isOpen()) {
                    continue;
                }
                seen.add(tx);
                long timeout = tx.timeout().timeoutNanos();
                long overdue = timeout <= 0 ? Long.MIN_VALUE : now - tx.startTimeNanos() - timeout - graceNanos;
                Long terminated = terminatedAt.get(tx);
                Long stopped = stoppedAt.get(tx);
                if (!heapHigh && overdue <= 0 && terminated == null) {
                    continue;  // the normal case: a transaction within its time, heap fine
                }
                Thread thread = queryThread(tx);
                if (heapHigh && thread != null) {
                    long bytes = threads.getThreadAllocatedBytes(thread.getId());
                    allocatedNow.put(thread.getId(), bytes);
                    long delta = bytes - allocatedBefore.getOrDefault(thread.getId(), bytes);
                    if (delta > hungriestBytes) {
                        hungriest = tx;
                        hungriestWorld = world;
                        hungriestDb = db;
                        hungriestBytes = delta;
                    }
                }
                if (timeout <= 0) {
                    continue;
                }
                if (overdue > 0 && terminated == null) {
                    tx.markForTermination(Status.Transaction.TransactionTimedOut);
                    terminatedAt.put(tx, now);
                    report("terminated", world, tx, "it ran past its timeout plus " + millis(graceNanos) + " ms");
                } else if (terminated != null && stopped == null && now - terminated > graceNanos) {
                    stop(world, db, tx, thread, "it was still running " + millis(now - terminated)
                            + " ms after termination");
                    stoppedAt.put(tx, now);
                    stoppedThread.put(tx, thread);
                } else if (stopped != null) {
                    Thread t = stoppedThread.get(tx);
                    long allowed = (unstoppable.contains(tx) ? DRAIN_GRACES : 1) * graceNanos;
                    if (!runsQueryOf(t, tx)) {
                        continue; // the thread has left this transaction's query (maybe to serve another client)
                    }
                    if (now - stopped <= allowed && stillComputing(t)) {
                        if (safeToStop(t) && runsQueryOf(t, tx)) {
                            if (unstoppable.remove(tx)) {
                                stoppedAt.put(tx, now); // its first stop: the usual grace from here
                            }
                            report("stopped thread " + t.getName() + " of", world, tx, "it was still running "
                                    + millis(now - stopped) + " ms after the last action");
                            t.stop(); // ThreadDeath may have been caught on the way out, or it can be stopped now
                        }
                    } else if (now - stopped > allowed && stillComputing(t)) {
                        StackTraceElement[] frames = t.getStackTrace();
                        halt(world, tx, "its thread did not stop (at " + String.join(" < ",
                                java.util.Arrays.stream(frames).limit(4).map(Object::toString).toList())
                                + "); the JVM halts with code " + EXIT_STUCK + " so that the server is restarted on "
                                + "the same ports");
                    }
                }
            }
        }
        terminatedAt.keySet().retainAll(seen);
        unstoppable.retainAll(seen);
        hungry.retainAll(seen);
        stoppedAt.keySet().retainAll(seen);
        stoppedThread.keySet().retainAll(seen);
        allocatedBefore.clear();
        allocatedBefore.putAll(allocatedNow);
        if (heapHigh && hungriest != null && !stoppedAt.containsKey(hungriest)) {
            long max = maxHeap;
            long used = oldGen.getUsage().getUsed();
            if (used > heapFraction * max && hungriestBytes > MIN_HUNGRY_BYTES) {
                // the old generation may hold garbage of a query already gone: count live data only
                System.gc();
                used = oldGen.getUsage().getUsed();
            }
            if (used > heapFraction * max && hungriestBytes > MIN_HUNGRY_BYTES) {
                hungriest.markForTermination(Status.General.TransactionOutOfMemoryError);
                terminatedAt.put(hungriest, now);
                hungry.add(hungriest);
                stop(hungriestWorld, hungriestDb, hungriest, queryThread(hungriest), String.format(
                        "the old generation holds %d MiB of a %d MiB heap and this query allocated the most "
                                + "(%d MiB in the last %d ms)", used >> 20, max >> 20, hungriestBytes >> 20,
                        intervalMillis));
                stoppedAt.put(hungriest, now);
                stoppedThread.put(hungriest, queryThread(hungriest));
            }
        }
    }

    /** A stopped thread still inside Cypher evaluation (rather than dead, or back to serving others). */
    private static boolean stillComputing(Thread thread) {
        if (thread == null || !thread.isAlive()) {
            return false;
        }
        for (StackTraceElement frame : thread.getStackTrace()) {
            String cls = frame.getClassName();
            if (cls.startsWith("org.neo4j.cypher.internal.runtime") || cls.startsWith("org.neo4j.cypher.operations")
                    || cls.startsWith("org.neo4j.cypher.internal.parser") || cls.startsWith("org.neo4j.cypher.internal.compiler")
                    || cls.startsWith("org.neo4j.cypher.internal.planner")) {
                return true;
            }
        }
        return false;
    }

    /**
     * Whether ``thread`` still executes ``tx``'s query. A Bolt worker is named after the connection it
     * serves while it serves it ("neo4j.BoltWorker-3 [bolt-7 - /127.0.0.1:53452]") and the query records that
     * name when it starts; once the connection is closed the worker goes back to the pool and may run
     * another client's query, which must never receive the ThreadDeath meant for this one.
     */
    private static boolean runsQueryOf(Thread thread, KernelTransactionHandle tx) {
        if (thread == null || !thread.isAlive()) {
            return false;
        }
        Optional<ExecutingQuery> query = tx.executingQuery();
        return query.isPresent() && thread.getName().equals(query.get().threadExecutingTheQueryName());
    }

    private static Thread queryThread(KernelTransactionHandle tx) {
        Optional<ExecutingQuery> query = tx.executingQuery();
        if (query.isEmpty()) {
            return null;
        }
        String name = query.get().threadExecutingTheQueryName();
        if (name == null) {
            return null;
        }
        for (Thread t : Thread.getAllStackTraces().keySet()) {
            if (name.equals(t.getName())) {
                return t;
            }
        }
        return null;
    }

    /**
     * Whether an asynchronous ThreadDeath may be delivered to ``thread`` now: its innermost frames, up to
     * the first Cypher one, are none of UNSAFE_TO_STOP (a thread inside a native call receives it on return,
     * so a JDK cleaner freeing a buffer would catch it and exit the JVM).
     */
    private static boolean safeToStop(Thread thread) {
        if (thread == null || !thread.isAlive()) {
            return false;
        }
        for (StackTraceElement frame : thread.getStackTrace()) {
            String cls = frame.getClassName();
            if (cls.startsWith("org.neo4j.cypher.")) {
                return true;
            }
            for (String prefix : UNSAFE_TO_STOP) {
                if (cls.startsWith(prefix)) {
                    return false;
                }
            }
        }
        return false; // not running a query at all: nothing to stop
    }

    @SuppressWarnings({"deprecation", "removal"})
    private void stop(String world, GraphDatabaseAPI db, KernelTransactionHandle tx, Thread thread, String why) {
        if (thread == null) {
            report("could not stop (no thread)", world, tx, why);
        } else if (!safeToStop(thread)) {
            unstoppable.add(tx);
            report("closed the connection of", world, tx, why + "; its thread " + thread.getName()
                    + " is sending the result or freeing memory, where stopping it could take the JVM down");
        } else {
            try {
                if (!stopThreads) {
                    throw new UnsupportedOperationException("watchdog.stop_threads=false");
                }
                report("stopped thread " + thread.getName() + " of", world, tx, why);
                // Java 17: the only way to end a computation that never checks for termination
                thread.stop();
            } catch (UnsupportedOperationException e) {
                // Java 20+ cannot stop threads: restarting the server is the only way left
                halt(world, tx, why + "; this Java cannot stop threads (" + e.getMessage()
                        + "); the JVM halts with code " + EXIT_STUCK);
            }
        }
        // the client gave up long ago; closing its connection rolls the transaction back and frees it
        tx.clientInfo().ifPresent(info -> {
            try {
                NetworkConnectionTracker tracker =
                        db.getDependencyResolver().resolveDependency(NetworkConnectionTracker.class);
                TrackedNetworkConnection connection = tracker.get(info.connectionId());
                if (connection != null) {
                    connection.close();
                }
            } catch (RuntimeException e) {
                report("could not close the connection of", world, tx, e.toString());
            }
        });
    }

    /** The last resort: the halt record first (see the class comment), then Runtime.halt. */
    private void halt(String world, KernelTransactionHandle tx, String why) {
        report("exiting", world, tx, why);
        if (haltRecord != null) {
            String query = tx.executingQuery().map(ExecutingQuery::rawQueryText).orElse("");
            String json = "{\"world\": " + quote(world) + ", \"query\": " + quote(query) + ", \"kind\": "
                    + quote(hungry.contains(tx) ? "memory" : "timeout") + ", \"reason\": " + quote(why)
                    + ", \"time_ms\": " + System.currentTimeMillis() + ", \"pid\": " + ProcessHandle.current().pid()
                    + "}\n";
            try {
                Path tmp = haltRecord.resolveSibling(haltRecord.getFileName() + ".tmp");
                Files.writeString(tmp, json, StandardCharsets.UTF_8);
                Files.move(tmp, haltRecord, StandardCopyOption.REPLACE_EXISTING, StandardCopyOption.ATOMIC_MOVE);
            } catch (IOException | RuntimeException e) {
                System.out.println("WATCHDOG could not write the halt record " + haltRecord + ": " + e);
            }
        }
        System.out.flush();
        Runtime.getRuntime().halt(EXIT_STUCK);
    }

    /** ``text`` as a JSON string. */
    private static String quote(String text) {
        StringBuilder out = new StringBuilder(text.length() + 2).append('"');
        for (int i = 0; i < text.length(); i++) {
            char c = text.charAt(i);
            if (c == '"' || c == '\\') {
                out.append('\\').append(c);
            } else if (c < 0x20 || c == 0x2028 || c == 0x2029 || Character.isSurrogate(c)) {
                out.append(String.format("\\u%04x", (int) c));
            } else {
                out.append(c);
            }
        }
        return out.append('"').toString();
    }

    private static long millis(long nanos) {
        return TimeUnit.NANOSECONDS.toMillis(nanos);
    }

    private static void report(String action, String world, KernelTransactionHandle tx, String why) {
        String text = tx.executingQuery().map(ExecutingQuery::rawQueryText).orElse("(no query)");
        if (text.length() > 200) {
            text = text.substring(0, 200) + "...";
        }
        System.out.printf("WATCHDOG %s transaction %d on %s: %s; query: %s%n", action,
                tx.getTransactionSequenceNumber(), world, why, text.replace('\n', ' '));
        System.out.flush();
    }
}
