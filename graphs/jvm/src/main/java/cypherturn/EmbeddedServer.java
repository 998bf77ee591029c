package cypherturn;

import java.io.IOException;
import java.io.Reader;
import java.nio.charset.StandardCharsets;
import java.nio.file.Files;
import java.nio.file.Path;
import java.util.ArrayList;
import java.util.LinkedHashMap;
import java.util.List;
import java.util.Map;
import java.util.Properties;
import java.util.concurrent.ExecutorService;
import java.util.concurrent.Executors;
import java.util.concurrent.Future;

import org.neo4j.dbms.api.DatabaseManagementService;
import org.neo4j.dbms.api.DatabaseManagementServiceBuilder;

/**
 * Runs one embedded Neo4j DBMS per world in this JVM, each serving Bolt on its own loopback port.
 *
 * Usage: java -cp ... cypherturn.EmbeddedServer server.properties
 *
 * The properties file (written by graphs/server.py) holds:
 *   worlds=a,b,c                     the world names
 *   world.NAME.home=/dir             the DBMS home directory of world NAME; its settings (Bolt port on
 *                                    127.0.0.1, memory caps, timeouts) are read from /dir/neo4j.conf
 *   ready_file=/path                 written once every DBMS answers, holding the pid
 *   bolt.max_buffer_bytes            the largest buffer Bolt may use, i.e. the largest result record
 *                                    (see CappedAllocator; 0: Netty's default, 2 GiB)
 *   watchdog.grace_ms, watchdog.interval_ms, watchdog.heap_fraction, watchdog.stop_threads
 *                                    the transaction watchdog's settings (see Watchdog)
 *   halt_record=/path                where the watchdog writes which query it halted the JVM for
 *
 * Each DBMS is shut down cleanly on SIGTERM (shutdown hook); SIGKILL leaves recoverable stores.
 */
public final class EmbeddedServer {
    public static void main(String[] args) throws Exception {
        if (args.length != 1) {
            System.err.println("usage: EmbeddedServer server.properties");
            System.exit(2);
        }
        Properties props = new Properties();
        try (Reader reader = Files.newBufferedReader(Path.of(args[0]), StandardCharsets.UTF_8)) {
            props.load(reader);
        }
        long ceiling = Long.parseLong(props.getProperty("bolt.max_buffer_bytes", "0"));
        if (ceiling > 0) {
            boolean capped = CappedAllocator.install((int) Math.min(ceiling, Integer.MAX_VALUE));
            System.out.println("bolt buffers capped at " + ceiling + " bytes: " + capped);
        }
        String[] worlds = props.getProperty("worlds", "").split(",");
        Map<String, DatabaseManagementService> services = new LinkedHashMap<>();
        Runtime.getRuntime().addShutdownHook(new Thread(() -> {
            synchronized (services) {
                // each DBMS checkpoints on shutdown; doing them in parallel keeps `stop` short
                List<Thread> stoppers = new ArrayList<>();
                for (Map.Entry<String, DatabaseManagementService> e : services.entrySet()) {
                    Thread t = new Thread(() -> {
                        try {
                            e.getValue().shutdown();
                        } catch (RuntimeException ex) {
                            System.err.println("shutdown of " + e.getKey() + " failed: " + ex);
                        }
                    });
                    t.start();
                    stoppers.add(t);
                }
                for (Thread t : stoppers) {
                    try {
                        t.join();
                    } catch (InterruptedException ex) {
                        Thread.currentThread().interrupt();
                    }
                }
                services.clear();
            }
            System.out.println("CYPHERTURN STOPPED");
            System.out.flush();
        }));

        // Starting a DBMS is mostly waiting on its own start-up; a few in parallel cut cold-start time.
        ExecutorService pool = Executors.newFixedThreadPool(Math.min(4, Math.max(1, worlds.length)));
        List<Future<?>> starts = new ArrayList<>();
        for (String raw : worlds) {
            String world = raw.trim();
            if (world.isEmpty()) {
                continue;
            }
            String home = require(props, "world." + world + ".home");
            starts.add(pool.submit(() -> {
                long t0 = System.nanoTime();
                DatabaseManagementService dbms = new DatabaseManagementServiceBuilder(Path.of(home))
                        .loadPropertiesFromFile(Path.of(home, "neo4j.conf"))
                        .build();
                synchronized (services) {
                    services.put(world, dbms);
                }
                System.out.printf("started %s in %.1f s%n", world,
                        (System.nanoTime() - t0) / 1e9);
                System.out.flush();
                return null;
            }));
        }
        try {
            for (Future<?> f : starts) {
                f.get();
            }
        } catch (Exception e) {
            System.err.println("CYPHERTURN FAILED: " + e);
            e.printStackTrace();
            System.exit(1);
        }
        pool.shutdown();
        Thread watchdog = new Thread(new Watchdog(services,
                Long.parseLong(props.getProperty("watchdog.grace_ms", "5000")),
                Long.parseLong(props.getProperty("watchdog.interval_ms", "200")),
                Double.parseDouble(props.getProperty("watchdog.heap_fraction", "0.7")),
                props.getProperty("halt_record") == null ? null : Path.of(props.getProperty("halt_record")),
                Boolean.parseBoolean(props.getProperty("watchdog.stop_threads", "true"))), "cypherturn-watchdog");
        watchdog.setDaemon(true);
        watchdog.start();
        String readyFile = props.getProperty("ready_file");
        if (readyFile != null) {
            writeAtomically(Path.of(readyFile), Long.toString(ProcessHandle.current().pid()) + "\n");
        }
        System.out.println("CYPHERTURN READY");
        System.out.flush();
        Thread.currentThread().join();
    }

    private static String require(Properties props, String key) {
        String value = props.getProperty(key);
        if (value == null) {
            throw new IllegalArgumentException("missing property " + key);
        }
        return value;
    }

    private static void writeAtomically(Path target, String content) throws IOException {
        Path tmp = target.resolveSibling(target.getFileName() + ".tmp");
        Files.writeString(tmp, content, StandardCharsets.UTF_8);
        Files.move(tmp, target, java.nio.file.StandardCopyOption.REPLACE_EXISTING,
                java.nio.file.StandardCopyOption.ATOMIC_MOVE);
    }
}
