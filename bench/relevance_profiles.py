"""Interest profiles for the relevance benchmark of the paper recommender.

Written on 2026-11-26 by a helper session, before any measurement was taken.
The helper did not see the ranking code or the data; the profiles come only from
general knowledge of what each arXiv category covers, phrased the way researchers
would fill in a newsletter's "keywords" and "in your own words" boxes.

SET_T and SET_R are two independent sets of profiles (keywords + one-sentence
description) by two different imagined researchers per category. SET_R2_KEYWORDS
is a third keyword list per category by yet another imagined researcher.
"""

CATEGORIES = (
    "cs.RO", "cs.CR", "cs.IR", "cs.SD", "cs.GT", "cs.HC", "cs.DC", "stat.ML", "cs.GR", "cs.CY",
    "cs.IT", "eess.IV", "cs.MA", "cs.CE", "cs.SE", "eess.SP", "cs.NE", "cs.DB", "cs.AR", "cs.SI",
)

SET_T = {
    "cs.RO": {
        "keywords": ["robot manipulation", "motion planning", "grasping", "sim-to-real transfer",
                     "legged locomotion", "SLAM", "imitation learning"],
        "description": (
            "I want papers on getting robots to act reliably in the physical world, from planning "
            "collision-free motions to learning dexterous manipulation skills from demonstrations."
        ),
    },
    "cs.CR": {
        "keywords": ["side-channel attacks", "malware detection", "fuzzing", "differential privacy",
                     "authentication", "vulnerability", "adversarial attacks"],
        "description": (
            "Practical security research: new attacks on real systems, vulnerability discovery with "
            "fuzzing or static analysis, and defenses that actually hold up against a motivated "
            "adversary."
        ),
    },
    "cs.IR": {
        "keywords": ["recommender systems", "dense retrieval", "learning to rank", "query expansion",
                     "retrieval-augmented generation", "click models"],
        "description": (
            "Work on search and recommendation, especially neural retrieval models, ranking evaluation,"
            " and how large language models are changing the way documents get found and ranked."
        ),
    },
    "cs.SD": {
        "keywords": ["audio generation", "speech synthesis", "music information retrieval",
                     "sound event detection", "source separation", "audio representation learning"],
        "description": (
            "Anything about machine listening and audio generation: separating sources, tagging sound "
            "events, transcribing music, or synthesizing realistic speech and music with neural models."
        ),
    },
    "cs.GT": {
        "keywords": ["mechanism design", "Nash equilibrium", "auctions", "fair division", "social choice",
                     "price of anarchy", "learning in games"],
        "description": (
            "Theory papers on strategic behavior and incentives, such as designing auctions, computing "
            "equilibria, and fair ways to allocate goods among self-interested agents."
        ),
    },
    "cs.HC": {
        "keywords": ["user study", "accessibility", "interaction design", "visualization",
                     "human-AI collaboration", "virtual reality", "usability"],
        "description": (
            "Studies of how people actually use technology, including interface design, accessibility "
            "for disabled users, and how people collaborate with or come to trust AI assistants."
        ),
    },
    "cs.DC": {
        "keywords": ["distributed training", "GPU clusters", "consensus protocols", "serverless computing",
                     "fault tolerance", "scheduling", "MPI"],
        "description": (
            "Systems papers on scaling computation across many machines, like scheduling jobs on GPU "
            "clusters, fault-tolerant consensus, and speeding up large model training and inference."
        ),
    },
    "stat.ML": {
        "keywords": ["Bayesian inference", "Gaussian processes", "generalization bounds", "variational inference",
                     "causal inference", "kernel methods", "uncertainty quantification"],
        "description": (
            "Statistically grounded machine learning: methods with theoretical guarantees, principled "
            "uncertainty estimates, Bayesian modeling, and analyses of when learning algorithms "
            "generalize."
        ),
    },
    "cs.GR": {
        "keywords": ["neural rendering", "Gaussian splatting", "3D reconstruction", "physics-based animation",
                     "mesh processing", "character animation", "ray tracing"],
        "description": (
            "Papers on creating and rendering 3D content, whether classic geometry processing and "
            "simulation or newer neural scene representations like radiance fields and Gaussian "
            "splatting."
        ),
    },
    "cs.CY": {
        "keywords": ["AI ethics", "algorithmic fairness", "misinformation", "privacy policy",
                     "education technology", "AI governance"],
        "description": (
            "Research on technology's impact on society, such as bias in automated decisions, AI "
            "regulation and governance, online misinformation, and how computing is taught in schools."
        ),
    },
    "cs.IT": {
        "keywords": ["channel capacity", "coding theory", "rate-distortion", "MIMO", "polar codes",
                     "information-theoretic security", "entropy"],
        "description": (
            "Fundamental limits of communication and compression: capacity results, new error-"
            "correcting code constructions, and information-theoretic analyses of secrecy and "
            "distributed storage."
        ),
    },
    "eess.IV": {
        "keywords": ["image restoration", "super-resolution", "medical image segmentation", "video compression",
                     "denoising", "MRI reconstruction"],
        "description": (
            "Image and video processing papers, especially restoring degraded images, learned "
            "compression codecs, and reconstruction or segmentation methods for medical scans like MRI "
            "and CT."
        ),
    },
    "cs.MA": {
        "keywords": ["multi-agent reinforcement learning", "cooperation", "agent communication", "swarm",
                     "negotiation", "LLM agents", "coordination"],
        "description": (
            "How groups of autonomous agents learn to cooperate, compete, and communicate, including "
            "multi-agent reinforcement learning and teams of language-model agents working on shared "
            "tasks."
        ),
    },
    "cs.CE": {
        "keywords": ["finite element method", "computational fluid dynamics", "physics-informed neural networks",
                     "surrogate modeling", "topology optimization", "option pricing"],
        "description": (
            "Numerical simulation for engineering and science, for example finite element solvers, "
            "surrogate models that replace expensive simulations, and machine learning for design "
            "optimization."
        ),
    },
    "cs.SE": {
        "keywords": ["code generation", "program repair", "software testing", "static analysis", "code review",
                     "technical debt", "large language models for code"],
        "description": (
            "Research on how software gets built and maintained, particularly automated testing, bug "
            "fixing, and whether LLM coding assistants really help developers in practice."
        ),
    },
    "eess.SP": {
        "keywords": ["beamforming", "channel estimation", "radar signal processing", "compressed sensing",
                     "integrated sensing and communication", "OFDM", "graph signal processing"],
        "description": (
            "Signal processing for wireless and sensing systems, such as beamforming design, channel "
            "estimation, radar waveforms, and sparse recovery from a limited number of measurements."
        ),
    },
    "cs.NE": {
        "keywords": ["spiking neural networks", "evolutionary algorithms", "genetic programming", "neuroevolution",
                     "neuromorphic computing", "multi-objective optimization"],
        "description": (
            "Biologically inspired computation: evolutionary and swarm optimization methods, evolving "
            "network architectures, and spiking neural networks running on neuromorphic hardware."
        ),
    },
    "cs.DB": {
        "keywords": ["query optimization", "transaction processing", "data lakes", "vector databases",
                     "cardinality estimation", "data cleaning", "text-to-SQL"],
        "description": (
            "Database systems research covering query processing, storage engines, and transactions, "
            "plus newer topics like learned indexes, vector search, and natural-language interfaces to "
            "SQL."
        ),
    },
    "cs.AR": {
        "keywords": ["hardware accelerator", "FPGA", "processing-in-memory", "cache", "RISC-V", "DNN accelerator",
                     "energy efficiency"],
        "description": (
            "Computer architecture papers on designing faster and more efficient chips, especially "
            "custom accelerators for deep learning, memory hierarchy design, and FPGA-based prototypes."
        ),
    },
    "cs.SI": {
        "keywords": ["social networks", "community detection", "information diffusion", "graph neural networks",
                     "influence maximization", "network embedding", "online communities"],
        "description": (
            "Analysis of social and information networks: how information and opinions spread online, "
            "finding communities, and models of network structure and user behavior on platforms."
        ),
    },
}

SET_R = {
    "cs.RO": {
        "keywords": ["autonomous navigation", "legged robots", "state estimation", "model predictive control",
                     "aerial robots", "field robotics", "multi-robot exploration"],
        "description": (
            "I follow mobile robots in unstructured outdoor settings, drones, legged platforms and "
            "ground vehicles that have to localize, map, and control themselves robustly without human "
            "help."
        ),
    },
    "cs.CR": {
        "keywords": ["cryptographic protocols", "zero-knowledge proofs", "post-quantum cryptography",
                     "homomorphic encryption", "secure multiparty computation", "lattice-based",
                     "smart contract security"],
        "description": (
            "Mostly the cryptography side: new proof systems, post-quantum schemes, and computing on "
            "encrypted data, plus formal security arguments for the protocols built from them."
        ),
    },
    "cs.IR": {
        "keywords": ["sequential recommendation", "collaborative filtering", "cold start",
                     "conversational recommendation", "user modeling", "popularity bias", "e-commerce"],
        "description": (
            "Recommendation from the user's side of things: modeling preferences that change over time,"
            " handling brand-new users and items, and fixing biases that push everyone toward popular "
            "content."
        ),
    },
    "cs.SD": {
        "keywords": ["speaker verification", "automatic speech recognition", "spatial audio",
                     "acoustic echo cancellation", "speech enhancement", "room acoustics", "hearing aids"],
        "description": (
            "Audio work on real recordings, cleaning up noisy speech, recognizing who is talking, "
            "coping with reverberant rooms, and rendering sound that feels spatially right over "
            "headphones."
        ),
    },
    "cs.GT": {
        "keywords": ["algorithmic game theory", "matching markets", "voting rules", "Bayesian persuasion",
                     "contract theory", "market design", "blockchain incentives"],
        "description": (
            "Where economics meets computation: how markets, platforms, and voting systems should be "
            "designed so participants behave well, and what information a designer ought to reveal."
        ),
    },
    "cs.HC": {
        "keywords": ["crowdsourcing", "qualitative interviews", "mental health apps", "haptic feedback",
                     "eye tracking", "wearables", "participatory design"],
        "description": (
            "I like empirical work with real participants, interviews and field deployments of new "
            "devices, especially wearables, haptics, and technology meant to support health and "
            "wellbeing."
        ),
    },
    "cs.DC": {
        "keywords": ["high-performance computing", "parallel algorithms", "Byzantine fault tolerance",
                     "edge computing", "federated learning", "load balancing", "blockchain"],
        "description": (
            "Both theory and practice of parallel computing, from scalable algorithms on supercomputers"
            " to Byzantine-robust protocols and coordinating many small devices at the network edge."
        ),
    },
    "stat.ML": {
        "keywords": ["conformal prediction", "diffusion models", "optimal transport",
                     "high-dimensional statistics", "sampling", "score matching", "double descent"],
        "description": (
            "Mathematical papers on modern learning: why overparameterized models work, distribution-"
            "free prediction intervals, generative modeling via diffusion and transport, and samplers "
            "with rates."
        ),
    },
    "cs.GR": {
        "keywords": ["procedural modeling", "text-to-3D", "cloth simulation", "motion capture",
                     "texture synthesis", "computational fabrication", "sketch-based modeling"],
        "description": (
            "Creative tools for artists and designers, like generating shapes and textures from text or"
            " sketches, simulating cloth and hair, and animating characters from captured motion."
        ),
    },
    "cs.CY": {
        "keywords": ["digital divide", "content moderation", "platform regulation", "surveillance",
                     "environmental impact of AI", "open data", "public sector algorithms"],
        "description": (
            "Who benefits and who gets harmed when governments and platforms adopt new technology, "
            "including surveillance, moderation policies, unequal internet access, and the carbon cost "
            "of computing."
        ),
    },
    "cs.IT": {
        "keywords": ["Shannon theory", "network coding", "age of information", "semantic communication",
                     "quantum information", "LDPC codes", "mutual information"],
        "description": (
            "I read this area for its elegant limits and their practical echoes: new coding schemes, "
            "keeping status updates fresh in networks, and goal-oriented semantic communication."
        ),
    },
    "eess.IV": {
        "keywords": ["remote sensing", "hyperspectral imaging", "computational imaging",
                     "image quality assessment", "low-light enhancement", "point cloud compression", "deblurring"],
        "description": (
            "How pictures are formed and processed beyond everyday photos: satellite and hyperspectral "
            "data, computational cameras, perceptual quality metrics, and enhancing shots taken in poor"
            " light."
        ),
    },
    "cs.MA": {
        "keywords": ["agent-based simulation", "mean field games", "consensus", "task allocation",
                     "emergent behavior", "distributed control", "game-theoretic planning"],
        "description": (
            "Simulating and controlling large populations of interacting agents, say traffic or crowds,"
            " with a focus on emergent collective behavior and decentralized task allocation among "
            "robots."
        ),
    },
    "cs.CE": {
        "keywords": ["computational finance", "portfolio optimization", "digital twin", "reduced-order modeling",
                     "inverse problems", "multiscale modeling", "high-frequency trading"],
        "description": (
            "Applied computation in finance and industry: pricing and risk models, portfolio methods, "
            "digital twins of physical assets, and fast reduced-order models for solving inverse "
            "problems."
        ),
    },
    "cs.SE": {
        "keywords": ["empirical software engineering", "mining software repositories", "continuous integration",
                     "open source", "requirements engineering", "microservices", "developer productivity"],
        "description": (
            "Empirical studies of developers and their projects, such as mining commit histories, build"
            " failures, open-source community health, and how architecture choices affect "
            "maintainability."
        ),
    },
    "eess.SP": {
        "keywords": ["biomedical signals", "EEG", "ECG", "time-frequency analysis", "Kalman filtering",
                     "sensor fusion", "wearable sensors"],
        "description": (
            "Processing physiological and sensor time series, like EEG and ECG from wearables, with "
            "filtering, spectral analysis, and tracking methods that survive noise and motion "
            "artifacts."
        ),
    },
    "cs.NE": {
        "keywords": ["genetic algorithms", "particle swarm optimization", "differential evolution",
                     "evolution strategies", "quality-diversity", "benchmarking metaheuristics",
                     "combinatorial optimization"],
        "description": (
            "Population-based search, especially careful benchmarking of evolutionary methods, quality-"
            "diversity algorithms, and evolution strategies applied to hard black-box problems."
        ),
    },
    "cs.DB": {
        "keywords": ["data integration", "entity resolution", "graph databases", "stream processing",
                     "data provenance", "data management for machine learning", "schema matching"],
        "description": (
            "I care about messy data: combining heterogeneous sources, matching records that refer to "
            "the same entity, tracking provenance, and managing streams and graphs at scale."
        ),
    },
    "cs.AR": {
        "keywords": ["memory systems", "DRAM", "branch prediction", "chiplets", "hardware security",
                     "microarchitecture", "cycle-accurate simulation"],
        "description": (
            "Classic processor and memory microarchitecture, including prefetchers, DRAM reliability, "
            "multicore interconnects, and chiplet designs, backed by rigorous cycle-level simulation."
        ),
    },
    "cs.SI": {
        "keywords": ["opinion dynamics", "echo chambers", "polarization", "temporal networks",
                     "epidemic spreading", "Twitter", "bot detection"],
        "description": (
            "Computational social science on online platforms: polarization and echo chambers, "
            "coordinated bots and influence campaigns, and dynamic models of how opinions and epidemics"
            " spread."
        ),
    },
}

SET_R2_KEYWORDS = {
    "cs.RO": ["humanoid robots", "vision-language-action models", "tactile sensing", "robot learning",
        "whole-body control", "trajectory optimization"],
    "cs.CR": ["intrusion detection", "network security", "phishing", "LLM jailbreak", "membership inference",
        "software supply chain"],
    "cs.IR": ["BM25", "reranking", "semantic search", "question answering", "retrieval evaluation",
        "query understanding", "text embeddings"],
    "cs.SD": ["text-to-audio", "neural audio codec", "singing voice", "music generation", "audio language models",
        "voice conversion"],
    "cs.GT": ["regret minimization", "correlated equilibrium", "cooperative games", "Shapley value",
        "congestion games", "strategic classification"],
    "cs.HC": ["conversational agents", "explainable AI", "augmented reality", "user experience", "older adults",
        "survey study", "trust in automation"],
    "cs.DC": ["cloud computing", "LLM inference serving", "Kubernetes", "resource allocation",
        "pipeline parallelism", "distributed storage", "energy-aware"],
    "stat.ML": ["two-sample test", "causal discovery", "Markov chain Monte Carlo", "statistical learning theory",
        "PAC-Bayes", "bandits", "dimensionality reduction"],
    "cs.GR": ["NeRF", "global illumination", "subdivision surfaces", "fluid simulation", "avatars",
        "differentiable rendering", "level of detail"],
    "cs.CY": ["generative AI in education", "disinformation", "gender bias", "sustainability",
        "law and technology", "accountability", "data protection"],
    "cs.IT": ["error-correcting codes", "finite blocklength", "wiretap channel",
        "reconfigurable intelligent surfaces", "coded caching", "information bottleneck"],
    "eess.IV": ["image segmentation", "CT reconstruction", "video enhancement", "diffusion models for imaging",
        "image fusion", "ultrasound", "inpainting"],
    "cs.MA": ["multi-agent path finding", "cooperative driving", "LLM-based multi-agent systems",
        "agent-based modeling", "auction-based coordination", "theory of mind"],
    "cs.CE": ["isogeometric analysis", "computational mechanics", "neural operators", "Monte Carlo simulation",
        "credit risk", "additive manufacturing", "mesh generation"],
    "cs.SE": ["unit test generation", "fault localization", "formal verification", "code smells",
        "software vulnerabilities", "AI coding agents", "refactoring"],
    "eess.SP": ["sparse signal recovery", "array signal processing", "direction of arrival", "adaptive filtering",
        "millimeter wave", "spectrum sensing", "deep unfolding"],
    "cs.NE": ["neural architecture search", "surrogate-assisted evolution", "spike-timing-dependent plasticity",
        "reservoir computing", "ant colony optimization", "genetic improvement"],
    "cs.DB": ["SQL", "indexing", "distributed databases", "OLAP", "learned query optimizer", "key-value store",
        "data quality"],
    "cs.AR": ["systolic array", "low-precision hardware", "in-memory computing", "network-on-chip",
        "approximate computing", "high-level synthesis", "GPU architecture"],
    "cs.SI": ["link prediction", "knowledge graphs", "centrality", "network science", "signed networks",
        "misinformation spread", "hypergraphs"],
}
