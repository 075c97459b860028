"""The architectures of the bundled models: their gradient tensors in forward order and the
backward FLOPs charged to each (make_models.py's docstring says how they are counted).

Shapes are facts of the architectures (the published totals are checked); the FLOP
charges are the modelling rules named in make_models.py. Python 3 standard library only.
"""

BIAS_FLOPS_PER_ELEM = 1.0
NORM_WEIGHT_FLOPS_PER_ELEM = 8.0
NORM_BIAS_FLOPS_PER_ELEM = 1.0
EMBED_FLOPS_PER_ELEM = 2.0

IMAGE_BATCH = 32
IMAGE_SIZE = 224
BERT_BATCH, BERT_SEQ = 32, 128
GPT2_BATCH, GPT2_SEQ = 8, 1024
LLAMA_BATCH, LLAMA_SEQ = 4, 2048
VIT_BATCH = 32


class Model:
    """Collects (name, numel, backward FLOPs) rows in forward order."""

    def __init__(self, name):
        self.name = name
        self.rows = []

    def add(self, name, numel, flops):
        self.rows.append([name, int(numel), float(flops)])

    def charge(self, name, flops):
        """Adds parameter-free work to an existing row."""
        for row in self.rows:
            if row[0] == name:
                row[2] += flops
                return
        raise KeyError(name)

    # --- building blocks -------------------------------------------------
    def conv(self, prefix, cin, cout, k, hout, wout, batch, bias, first=False):
        fwd = 2.0 * cin * cout * k * k * hout * wout * batch
        self.add(prefix + ".weight", cout * cin * k * k, fwd * (1.0 if first else 2.0))
        if bias:
            self.add(prefix + ".bias", cout, BIAS_FLOPS_PER_ELEM * cout * hout * wout * batch)

    def norm(self, prefix, channels, elems):
        """BatchNorm / LayerNorm over `elems` activation elements."""
        self.add(prefix + ".weight", channels, NORM_WEIGHT_FLOPS_PER_ELEM * elems)
        self.add(prefix + ".bias", channels, NORM_BIAS_FLOPS_PER_ELEM * elems)

    def linear(self, prefix, fin, fout, tokens, bias=True):
        self.add(prefix + ".weight", fin * fout, 2.0 * (2.0 * fin * fout * tokens))
        if bias:
            self.add(prefix + ".bias", fout, BIAS_FLOPS_PER_ELEM * fout * tokens)

    def embedding(self, name, rows, hidden, tokens):
        self.add(name, rows * hidden, EMBED_FLOPS_PER_ELEM * tokens * hidden)


def resnet50():
    """torchvision.models.resnet50 (v1.5: stride on the 3x3 conv)."""
    m = Model("resnet50")
    b = IMAGE_BATCH
    h = IMAGE_SIZE // 2  # conv1: 7x7 stride 2 -> 112
    m.conv("conv1", 3, 64, 7, h, h, b, bias=False, first=True)
    m.norm("bn1", 64, 64 * h * h * b)
    h //= 2  # maxpool 3x3 stride 2 -> 56
    inplanes = 64
    for li, (planes, blocks, stride) in enumerate(
        [(64, 3, 1), (128, 4, 2), (256, 6, 2), (512, 3, 2)], start=1
    ):
        for bi in range(blocks):
            p = "layer%d.%d" % (li, bi)
            s = stride if bi == 0 else 1
            hin, hout = h, h // s
            out = planes * 4
            m.conv(p + ".conv1", inplanes, planes, 1, hin, hin, b, bias=False)
            m.norm(p + ".bn1", planes, planes * hin * hin * b)
            m.conv(p + ".conv2", planes, planes, 3, hout, hout, b, bias=False)
            m.norm(p + ".bn2", planes, planes * hout * hout * b)
            m.conv(p + ".conv3", planes, out, 1, hout, hout, b, bias=False)
            m.norm(p + ".bn3", out, out * hout * hout * b)
            if bi == 0:  # downsample = conv1x1(stride) + BN
                m.conv(p + ".downsample.0", inplanes, out, 1, hout, hout, b, bias=False)
                m.norm(p + ".downsample.1", out, out * hout * hout * b)
            inplanes, h = out, hout
    m.linear("fc", 2048, 1000, b)  # after global average pooling
    return m, 25557032, 161


def vgg16():
    """torchvision.models.vgg16 (configuration D, no batch norm)."""
    m = Model("vgg16")
    b = IMAGE_BATCH
    cfg = [64, 64, "M", 128, 128, "M", 256, 256, 256, "M", 512, 512, 512, "M", 512, 512, 512, "M"]
    idx, cin, h = 0, 3, IMAGE_SIZE
    for v in cfg:
        if v == "M":
            h //= 2
            idx += 1
            continue
        m.conv("features.%d" % idx, cin, v, 3, h, h, b, bias=True, first=(idx == 0))
        idx += 2  # Conv2d, ReLU
        cin = v
    # AdaptiveAvgPool2d((7, 7)) is the identity at 224x224: 512*7*7 = 25088
    m.linear("classifier.0", 512 * 7 * 7, 4096, b)  # then ReLU, Dropout
    m.linear("classifier.3", 4096, 4096, b)  # then ReLU, Dropout
    m.linear("classifier.6", 4096, 1000, b)
    return m, 138357544, 32


def bert_base():
    """transformers BertModel, bert-base-uncased config, with pooler."""
    m = Model("bert_base")
    hid, inter, layers, vocab, maxpos, types = 768, 3072, 12, 30522, 512, 2
    b, seq = BERT_BATCH, BERT_SEQ
    tok = b * seq
    m.embedding("embeddings.word_embeddings.weight", vocab, hid, tok)
    m.embedding("embeddings.position_embeddings.weight", maxpos, hid, tok)
    m.embedding("embeddings.token_type_embeddings.weight", types, hid, tok)
    m.norm("embeddings.LayerNorm", hid, tok * hid)
    for i in range(layers):
        p = "encoder.layer.%d." % i
        m.linear(p + "attention.self.query", hid, hid, tok)
        m.linear(p + "attention.self.key", hid, hid, tok)
        m.linear(p + "attention.self.value", hid, hid, tok)
        # attention core: backward runs after attention.output.dense's, before value's
        m.charge(p + "attention.self.value.weight", 2.0 * 4.0 * seq * seq * hid * b)
        m.linear(p + "attention.output.dense", hid, hid, tok)
        m.norm(p + "attention.output.LayerNorm", hid, tok * hid)
        m.linear(p + "intermediate.dense", hid, inter, tok)
        m.linear(p + "output.dense", inter, hid, tok)
        m.norm(p + "output.LayerNorm", hid, tok * hid)
    m.linear("pooler.dense", hid, hid, b)  # on the [CLS] token only
    return m, 109482240, 5 + 16 * layers + 2


def gpt2(name, hid, layers):
    """transformers GPT2LMHeadModel (vocabulary 50257, 1024 positions, MLP 4 x hidden);
    lm_head tied to wte."""
    m = Model(name)
    vocab, npos = 50257, 1024
    b, seq = GPT2_BATCH, GPT2_SEQ
    tok = b * seq
    m.embedding("transformer.wte.weight", vocab, hid, tok)
    m.embedding("transformer.wpe.weight", npos, hid, tok)
    for i in range(layers):
        p = "transformer.h.%d." % i
        m.norm(p + "ln_1", hid, tok * hid)
        m.linear(p + "attn.c_attn", hid, 3 * hid, tok)  # Conv1D, weight (hid, 3 hid)
        m.charge(p + "attn.c_attn.weight", 2.0 * 4.0 * seq * seq * hid * b)
        m.linear(p + "attn.c_proj", hid, hid, tok)
        m.norm(p + "ln_2", hid, tok * hid)
        m.linear(p + "mlp.c_fc", hid, 4 * hid, tok)
        m.linear(p + "mlp.c_proj", 4 * hid, hid, tok)
    m.norm("transformer.ln_f", hid, tok * hid)
    # tied LM head: its backward (dX and the dW part of wte.grad) runs first
    m.charge("transformer.ln_f.bias", 2.0 * (2.0 * hid * vocab * tok))
    return m


def gpt2_small():
    """gpt2 (small) config: hidden 768, 12 layers."""
    return gpt2("gpt2_small", 768, 12), 124439808, 2 + 12 * 12 + 2


def gpt2_xl():
    """gpt2-xl config (Radford et al. 2019: 48 layers, d_model 1600)."""
    return gpt2("gpt2_xl", 1600, 48), 1557611200, 2 + 12 * 48 + 2


def llama_7b():
    """transformers LlamaForCausalLM with the LLaMA-7B shapes (Touvron et al. 2023, Table 2:
    dim 4096, 32 layers, 32 heads; vocabulary 32000; SwiGLU hidden 11008; RMSNorm weights
    only; no biases; lm_head not tied). Rows in forward use order (input_layernorm before
    the attention, post_attention_layernorm before the MLP)."""
    m = Model("llama_7b")
    hid, layers, vocab, ffn = 4096, 32, 32000, 11008
    b, seq = LLAMA_BATCH, LLAMA_SEQ
    tok = b * seq
    m.embedding("model.embed_tokens.weight", vocab, hid, tok)
    for i in range(layers):
        p = "model.layers.%d." % i
        # RMSNorm: one weight, no bias; charged like a norm weight
        m.add(p + "input_layernorm.weight", hid, NORM_WEIGHT_FLOPS_PER_ELEM * tok * hid)
        for proj in ("q_proj", "k_proj", "v_proj"):
            m.linear(p + "self_attn." + proj, hid, hid, tok, bias=False)
        m.charge(p + "self_attn.v_proj.weight", 2.0 * 4.0 * seq * seq * hid * b)
        m.linear(p + "self_attn.o_proj", hid, hid, tok, bias=False)
        m.add(p + "post_attention_layernorm.weight", hid, NORM_WEIGHT_FLOPS_PER_ELEM * tok * hid)
        m.linear(p + "mlp.gate_proj", hid, ffn, tok, bias=False)
        m.linear(p + "mlp.up_proj", hid, ffn, tok, bias=False)
        m.linear(p + "mlp.down_proj", ffn, hid, tok, bias=False)
    m.add("model.norm.weight", hid, NORM_WEIGHT_FLOPS_PER_ELEM * tok * hid)
    m.linear("lm_head", hid, vocab, tok, bias=False)  # its backward runs first
    return m, 6738415616, 1 + 9 * layers + 2


def vit_l16():
    """timm vit_large_patch16_224 (Dosovitskiy et al. 2021, Table 1: ViT-Large, 24 layers,
    hidden 1024, MLP 4096, patch 16) with a 1000-class head. Rows in forward use order:
    patch embedding, [CLS] token, position embedding, blocks, final norm, head."""
    m = Model("vit_l16")
    hid, layers, mlp, patch, classes = 1024, 24, 4096, 16, 1000
    b = VIT_BATCH
    side = IMAGE_SIZE // patch  # 14
    seq = side * side + 1  # 197 tokens with [CLS]
    tok = b * seq
    m.conv("patch_embed.proj", 3, hid, patch, side, side, b, bias=True, first=True)
    m.add("cls_token", hid, EMBED_FLOPS_PER_ELEM * b * hid)
    m.add("pos_embed", seq * hid, EMBED_FLOPS_PER_ELEM * tok * hid)
    for i in range(layers):
        p = "blocks.%d." % i
        m.norm(p + "norm1", hid, tok * hid)
        m.linear(p + "attn.qkv", hid, 3 * hid, tok)
        m.charge(p + "attn.qkv.weight", 2.0 * 4.0 * seq * seq * hid * b)
        m.linear(p + "attn.proj", hid, hid, tok)
        m.norm(p + "norm2", hid, tok * hid)
        m.linear(p + "mlp.fc1", hid, mlp, tok)
        m.linear(p + "mlp.fc2", mlp, hid, tok)
    m.norm("norm", hid, tok * hid)
    m.linear("head", hid, classes, b)  # on the [CLS] token only
    return m, 304326632, 4 + 12 * layers + 4


# name -> (builder, published total, its source, legacy: times at 15 TFLOP/s by default)
MODELS = {
    "resnet50": (resnet50, 25.6e6, "He et al. 2016; torchvision reports 25,557,032", True),
    "vgg16": (vgg16, 138.4e6, "Simonyan and Zisserman 2015; torchvision 138,357,544", True),
    "bert_base": (bert_base, 110e6, "Devlin et al. 2019: BERT-base 110M", True),
    "gpt2_small": (gpt2_small, 124.4e6, "HuggingFace gpt2: 124,439,808", True),
    "gpt2_xl": (gpt2_xl, 1.558e9, "Radford et al. 2019 (1.5B); HuggingFace gpt2-xl 1.558B",
                False),
    "llama_7b": (llama_7b, 6.74e9, "Touvron et al. 2023 (LLaMA-7B, 6.7B); "
                 "HuggingFace 6,738,415,616", False),
    "vit_l16": (vit_l16, 304e6, "Dosovitskiy et al. 2021, Table 1 (ViT-L 307M); "
                "timm vit_large_patch16_224 304.3M", False),
}
