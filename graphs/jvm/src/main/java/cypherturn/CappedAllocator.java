package cypherturn;

import java.lang.reflect.Field;

import io.netty.buffer.ByteBuf;
import io.netty.buffer.PooledByteBufAllocator;
import io.netty.util.internal.PlatformDependent;

import org.neo4j.bolt.BoltServer;

/**
 * Bolt's buffer allocator (the one Neo4j's BoltServer makes: pooled, direct when the platform prefers it)
 * with a ceiling on the capacity of every buffer it hands out.
 *
 * Neo4j serializes each result record into one buffer that grows until the whole record is in it, with no
 * check for termination on the way (Watchdog: the thread is in Bolt/Packstream code, where stopping it is
 * unsafe). A small query can describe a record of gigabytes ([y IN l2 | l2] over a list of 1,000 lists of
 * 1,000), so the worker wrote for minutes, holding direct memory, until the watchdog had to halt the JVM.
 * With the ceiling, writing past it throws IndexOutOfBoundsException inside the worker: Neo4j fails that
 * query (FAILURE, or the connection closed) and frees the buffer, within the time it takes to write the
 * ceiling's worth of bytes. Clients cap results far below it (graphs.executor: 16 MiB by default).
 */
final class CappedAllocator extends PooledByteBufAllocator {
    private final int ceiling;

    CappedAllocator(int ceiling) {
        super(PlatformDependent.directBufferPreferred());
        this.ceiling = ceiling;
    }

    @Override
    protected ByteBuf newDirectBuffer(int initialCapacity, int maxCapacity) {
        return super.newDirectBuffer(Math.min(initialCapacity, ceiling), Math.min(maxCapacity, ceiling));
    }

    @Override
    protected ByteBuf newHeapBuffer(int initialCapacity, int maxCapacity) {
        return super.newHeapBuffer(Math.min(initialCapacity, ceiling), Math.min(maxCapacity, ceiling));
    }

    /**
     * Makes BoltServer use a CappedAllocator: sets the instance of its lazy NETTY_BUF_ALLOCATOR before any
     * DBMS starts (nothing has asked for it yet). Returns false, and changes nothing, when this Neo4j's
     * BoltServer no longer has that field in that shape.
     */
    static boolean install(int ceiling) {
        try {
            Object lazy = BoltServer.NETTY_BUF_ALLOCATOR;
            Field instance = lazy.getClass().getDeclaredField("instance");
            instance.setAccessible(true);
            synchronized (lazy) {
                if (instance.get(lazy) != null) {
                    return false;
                }
                instance.set(lazy, new CappedAllocator(ceiling));
            }
            return BoltServer.NETTY_BUF_ALLOCATOR.get() instanceof CappedAllocator;
        } catch (ReflectiveOperationException | RuntimeException e) {
            System.err.println("CYPHERTURN could not cap Bolt's buffers: " + e);
            return false;
        }
    }
}
