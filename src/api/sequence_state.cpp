// Context::save_sequence / load_sequence: a sequence's KV-cache rows as
// bytes. Layout (little-endian, as the machines this runs on):
//   "LNTS", version u32
//   arch length u32, arch bytes; n_layer, n_embd, n_vocab, cache row
//   (head_dim * n_head_kv) u32; cache type u32 (version 2: K's type u32,
//   V's type u32; version 1, still written when the two agree, has one)
//   positions u32, tokens u32 (0 or positions), tokens i32[]
//   per layer: K rows, then V rows, positions rows each, in their types
//   checksum64 of everything before it, u64
// A sequence owns cells [seq * n_ctx, seq * n_ctx + n_ctx) of every layer's
// cache, position p in cell seq * n_ctx + p, so a state is those cells'
// first rows, whichever backend holds them.
#include <cstdio>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <string>

#include "api/context_impl.h"
#include "core/checksum.h"

namespace lantern {
namespace {

constexpr char kMagic[4] = {'L', 'N', 'T', 'S'};
constexpr uint32_t kVersion = 2;  // the newest this build reads and writes

[[noreturn]] void damaged(const std::string& what) {
    throw Error(ErrorCode::Format, "sequence state: " + what);
}

class Writer {
public:
    explicit Writer(std::vector<uint8_t>& out) : out_(out) {}
    void bytes(const void* p, size_t n) {
        const size_t at = out_.size();
        out_.resize(at + n);
        if (n > 0) std::memcpy(out_.data() + at, p, n);
    }
    void u32(uint32_t v) { bytes(&v, 4); }

private:
    std::vector<uint8_t>& out_;
};

class Reader {
public:
    explicit Reader(const std::vector<uint8_t>& in, size_t end) : in_(in), end_(end) {}
    const uint8_t* bytes(size_t n, const char* what) {
        if (n > end_ - at_) damaged(std::string("ends inside its ") + what + " (" + std::to_string(end_) + " bytes)");
        const uint8_t* p = in_.data() + at_;
        at_ += n;
        return p;
    }
    uint32_t u32(const char* what) {
        uint32_t v;
        std::memcpy(&v, bytes(4, what), 4);
        return v;
    }
    size_t left() const { return end_ - at_; }

private:
    const std::vector<uint8_t>& in_;
    size_t end_;
    size_t at_ = 0;
};

// The fields a state must agree on with the context that loads it.
struct StateShape {
    std::string arch;
    uint32_t n_layer, n_embd, n_vocab, row, type, v_type;
};

StateShape shape_of(const Context::Impl& c) {
    const Tensor& k = *c.kv.k[0];
    return {c.m.hp.arch,
            static_cast<uint32_t>(c.m.hp.n_layer),
            static_cast<uint32_t>(c.m.hp.n_embd),
            static_cast<uint32_t>(c.m.hp.n_vocab),
            static_cast<uint32_t>(k.ne[0]),
            static_cast<uint32_t>(k.type),
            static_cast<uint32_t>(c.kv.v[0]->type)};
}

std::string type_name(uint32_t id) {
    const std::optional<DType> t = dtype_from_id(id);
    return t ? dtype_name(*t) : "type " + std::to_string(id);
}

std::string describe(const StateShape& s) {
    return s.arch + ", " + std::to_string(s.n_layer) + " layers, width " + std::to_string(s.n_embd) + ", " +
           std::to_string(s.n_vocab) + " tokens, cache rows of " + std::to_string(s.row) + " " +
           type_name(s.type) + (s.v_type == s.type ? "" : " (values " + type_name(s.v_type) + ")");
}

// Byte offset of the first cell of `seq` in a layer's cache tensor.
size_t first_cell(const Context::Impl& c, const Tensor& t, int seq) {
    return t.offset + static_cast<size_t>(seq) * static_cast<size_t>(c.kv.n_ctx_seq) * t.nb[1];
}

void check_seq(const Context::Impl& c, int seq, const char* what) {
    if (seq < 0 || seq >= c.params.n_seq) {
        throw Error(ErrorCode::InvalidArgument, std::string(what) + ": sequence " + std::to_string(seq) +
                                                    " is outside [0, " + std::to_string(c.params.n_seq) + ")");
    }
}

}  // namespace

std::vector<uint8_t> Context::save_sequence(int seq, const std::vector<int32_t>& tokens) const {
    const Impl& c = *impl_;
    check_seq(c, seq, "save_sequence");
    const int n = c.seq_len[static_cast<size_t>(seq)];
    if (!tokens.empty() && tokens.size() != static_cast<size_t>(n)) {
        throw Error(ErrorCode::InvalidArgument, "save_sequence: " + std::to_string(tokens.size()) +
                                                    " tokens given for a sequence of " + std::to_string(n));
    }
    const StateShape s = shape_of(c);
    std::vector<uint8_t> out;
    const size_t k_bytes = static_cast<size_t>(n) * c.kv.k[0]->nb[1];
    const size_t v_bytes = static_cast<size_t>(n) * c.kv.v[0]->nb[1];
    out.reserve(64 + s.arch.size() + tokens.size() * 4 + c.kv.k.size() * (k_bytes + v_bytes) + 8);
    Writer w(out);
    w.bytes(kMagic, 4);
    w.u32(s.v_type == s.type ? 1 : kVersion);
    w.u32(static_cast<uint32_t>(s.arch.size()));
    w.bytes(s.arch.data(), s.arch.size());
    for (uint32_t v : {s.n_layer, s.n_embd, s.n_vocab, s.row, s.type}) w.u32(v);
    if (s.v_type != s.type) w.u32(s.v_type);
    w.u32(static_cast<uint32_t>(n));
    w.u32(static_cast<uint32_t>(tokens.size()));
    w.bytes(tokens.data(), tokens.size() * sizeof(int32_t));
    c.sched->synchronize();
    for (size_t il = 0; il < c.kv.k.size(); ++il) {
        for (const Tensor* t : {c.kv.k[il], c.kv.v[il]}) {
            const size_t rows_bytes = t == c.kv.k[il] ? k_bytes : v_bytes;
            const size_t at = out.size();
            out.resize(at + rows_bytes);
            if (rows_bytes > 0) t->buffer->read(first_cell(c, *t, seq), out.data() + at, rows_bytes);
        }
    }
    const uint64_t sum = checksum64(out.data(), out.size());
    w.bytes(&sum, 8);
    return out;
}

std::vector<int32_t> Context::load_sequence(int seq, const std::vector<uint8_t>& state) {
    Impl& c = *impl_;
    check_seq(c, seq, "load_sequence");
    // Everything is checked before the cache is touched.
    if (state.size() < 16) damaged("too short (" + std::to_string(state.size()) + " bytes)");
    if (std::memcmp(state.data(), kMagic, 4) != 0) damaged("not a saved sequence (no LNTS magic)");
    uint64_t sum;
    std::memcpy(&sum, state.data() + state.size() - 8, 8);
    if (checksum64(state.data(), state.size() - 8) != sum) damaged("checksum mismatch (the bytes are damaged)");
    Reader r(state, state.size() - 8);
    r.bytes(4, "magic");
    const uint32_t version = r.u32("version");
    if (version != 1 && version != kVersion) damaged("version " + std::to_string(version) + " (this build reads " + std::to_string(kVersion) + ")");
    StateShape s;
    const uint32_t arch_len = r.u32("architecture");
    const uint8_t* arch = r.bytes(arch_len, "architecture");
    s.arch.assign(reinterpret_cast<const char*>(arch), arch_len);
    s.n_layer = r.u32("shape");
    s.n_embd = r.u32("shape");
    s.n_vocab = r.u32("shape");
    s.row = r.u32("shape");
    s.type = r.u32("shape");
    s.v_type = version >= 2 ? r.u32("shape") : s.type;
    const StateShape mine = shape_of(c);
    if (s.arch != mine.arch || s.n_layer != mine.n_layer || s.n_embd != mine.n_embd || s.n_vocab != mine.n_vocab ||
        s.row != mine.row || s.type != mine.type || s.v_type != mine.v_type) {
        throw Error(ErrorCode::InvalidArgument, "load_sequence: the state is for another model or cache type (" + describe(s) +
                                                    "; this one: " + describe(mine) + ")");
    }
    const uint32_t n = r.u32("length");
    const uint32_t n_tokens = r.u32("token count");
    if (n_tokens != 0 && n_tokens != n) {
        damaged(std::to_string(n_tokens) + " tokens for " + std::to_string(n) + " positions");
    }
    if (n > static_cast<uint32_t>(c.params.n_ctx)) {
        throw Error(ErrorCode::ContextFull, "load_sequence: the state holds " + std::to_string(n) +
                                                " positions; this context holds " + std::to_string(c.params.n_ctx));
    }
    std::vector<int32_t> tokens(n_tokens);
    std::memcpy(tokens.data(), r.bytes(static_cast<size_t>(n_tokens) * 4, "tokens"), static_cast<size_t>(n_tokens) * 4);
    for (int32_t t : tokens) {
        if (t < 0 || t >= c.m.hp.n_vocab) damaged("token id " + std::to_string(t) + " is outside the vocabulary");
    }
    const size_t k_bytes = static_cast<size_t>(n) * c.kv.k[0]->nb[1];
    const size_t v_bytes = static_cast<size_t>(n) * c.kv.v[0]->nb[1];
    if (r.left() != c.kv.k.size() * (k_bytes + v_bytes)) {
        damaged(std::to_string(r.left()) + " bytes of cache rows where " + std::to_string(n) + " positions take " +
                std::to_string(c.kv.k.size() * (k_bytes + v_bytes)));
    }
    c.sched->synchronize();
    for (size_t il = 0; il < c.kv.k.size(); ++il) {
        for (Tensor* t : {c.kv.k[il], c.kv.v[il]}) {
            const size_t rows_bytes = t == c.kv.k[il] ? k_bytes : v_bytes;
            const uint8_t* rows = r.bytes(rows_bytes, "cache rows");
            if (rows_bytes > 0) t->buffer->write(first_cell(c, *t, seq), rows, rows_bytes);
        }
    }
    c.seq_len[static_cast<size_t>(seq)] = static_cast<int>(n);
    c.ends_in_output[static_cast<size_t>(seq)] = 0;
    return tokens;
}

void Context::save_sequence_file(int seq, const std::string& path, const std::vector<int32_t>& tokens) const {
    const std::vector<uint8_t> state = save_sequence(seq, tokens);
    const std::string tmp = path + ".tmp";
    {
        std::ofstream out(tmp, std::ios::binary | std::ios::trunc);
        out.write(reinterpret_cast<const char*>(state.data()), static_cast<std::streamsize>(state.size()));
        out.close();
        if (!out) {
            std::remove(tmp.c_str());
            throw Error(ErrorCode::Io, "cannot write " + tmp);
        }
    }
    std::error_code ec;
    std::filesystem::rename(tmp, path, ec);
    if (ec) {
        std::remove(tmp.c_str());
        throw Error(ErrorCode::Io, "cannot rename " + tmp + " to " + path + ": " + ec.message());
    }
}

bool Context::is_sequence_file(const std::string& path) {
    char magic[4] = {};
    std::ifstream in(path, std::ios::binary);
    return in.read(magic, 4) && std::memcmp(magic, kMagic, 4) == 0;
}

std::vector<int32_t> Context::load_sequence_file(int seq, const std::string& path) {
    std::ifstream in(path, std::ios::binary | std::ios::ate);
    if (!in) throw Error(ErrorCode::Io, "cannot open " + path);
    const std::streamoff size = in.tellg();
    std::vector<uint8_t> state(size > 0 ? static_cast<size_t>(size) : 0);
    in.seekg(0);
    in.read(reinterpret_cast<char*>(state.data()), static_cast<std::streamsize>(state.size()));
    if (!in) throw Error(ErrorCode::Io, "cannot read " + path);
    try {
        return load_sequence(seq, state);
    } catch (const Error& e) {
        throw Error(e.code(), path + ": " + e.what());
    }
}

}  // namespace lantern
